"""What a synthetic Nsight Systems export holds (the data of ``gen_nsys_export.py``): the nsys 3.25
export schema's DDL (table and column names, declared types, NOT NULL constraints, as nsys 2026.2
writes them), the kernel catalog (real demangled names of the kernels an SGLang verify step runs,
with mean durations), and the runtime API names and event codes nsys records."""

from __future__ import annotations

SCHEMA_VERSION = "3.25.0"

# --- DDL (nsys 3.25 column order, types and constraints; comments dropped) -----------------------

DDL = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
    "TARGET_INFO_SESSION_START_TIME": (
        "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER"
    ),
    "ANALYSIS_DETAILS": (
        "globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,"
        " stopTime INTEGER NOT NULL"
    ),
    "PROCESSES": "globalPid INTEGER, pid INTEGER, name TEXT",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
    "TARGET_INFO_GPU": (
        "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete"
        " INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate"
        " INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT,"
        " cuDevice INTEGER, ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER, nodeMask"
        " INTEGER, constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock INTEGER,"
        " maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER,"
        " maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER, maxWarpsPerSm"
        " INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER,"
        " maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER, maxGridDimY INTEGER,"
        " maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER, smMajor INTEGER, smMinor"
        " INTEGER"
    ),
    "TARGET_INFO_CUDA_DEVICE": (
        "gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT NULL, uuid TEXT,"
        " numMultiprocessors INTEGER"
    ),
    "ENUM_NSYS_EVENT_CLASS": "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT",
    "ENUM_CUDA_MEMCPY_OPER": "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER"
        " NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,"
        " mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER"
        " NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX"
        " INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory"
        " INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT"
        " NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted"
        " INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone"
        " INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, graphId INTEGER, clusterX"
        " INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER,"
        " maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER,"
        " sharedMemoryRequestedPercentage INTEGER, tensorSizeMinusOneElements TEXT NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid"
        " INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,"
        " callchainId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER"
        " NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId"
        " INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,"
        " dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,"
        " virtualAddress INTEGER, copyCount INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER"
        " NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, deprecatedSyncType INTEGER, syncType INTEGER NOT NULL, eventId INTEGER"
        " NOT NULL, eventSyncId INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category"
        " INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId"
        " INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL,"
        " uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText"
        " TEXT, binaryData TEXT"
    ),
}

# --- kernels: (demangled name, short name, mean duration ns) --------------------------------------

KERNELS: dict[str, tuple[str, str, int]] = {
    "rmsnorm": (
        (
            "void flashinfer::norm::RMSNormKernel<(unsigned int)8, __nv_bfloat16>(T2 *, T2 *, T2 *,"
            " unsigned int, unsigned int, unsigned int, float, float)"
        ),
        "RMSNormKernel",
        4_000,
    ),
    "add_rmsnorm": (
        (
            "void flashinfer::norm::FusedAddRMSNormKernel<(unsigned int)8, __nv_bfloat16>(T2 *, T2"
            " *, T2 *, unsigned int, unsigned int, unsigned int, float, float)"
        ),
        "FusedAddRMSNormKernel",
        5_000,
    ),
    "qkv_gemm": ("nvjet_tst_64x8_64x16_4x1_v_bz_TNN", "nvjet_tst_64x8_64x16_4x1_v_bz_TNN", 18_000),
    "o_gemm": (
        "nvjet_tst_128x16_64x8_2x1_v_bz_splitK_TNT",
        "nvjet_tst_128x16_64x8_2x1_v_bz_splitK_TNT",
        12_000,
    ),
    "lm_head": (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        60_000,
    ),
    "rope": (
        (
            "void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<(bool)1, (unsigned int)128,"
            " (unsigned int)8, (unsigned int)16, __nv_bfloat16, long>(T5 *, T5 *, T5 *, T5 *, float"
            " *, T6 *, unsigned int, unsigned int, unsigned int, unsigned int, unsigned long,"
            " unsigned long, unsigned long, unsigned long, unsigned long, unsigned long, unsigned"
            " long, unsigned long)"
        ),
        "BatchQKApplyRotaryPosIdsCosSinCacheKernel",
        3_000,
    ),
    "fa3": (
        (
            "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
            "flash::CollectiveMainloopFwdSm90<(int)2,"
            " cute::tuple<cute::C<(int)1>, cute::C<(int)1>, cute::C<(int)1>>,"
            " cute::tuple<cute::C<(int)128>, cute::C<(int)128>, cute::C<(int)128>>, (int)128,"
            " cutlass::bfloat16_t, float, cutlass::arch::Sm90, (bool)1, (bool)0, (bool)0, (bool)1,"
            " (bool)1, (bool)0, (bool)0, (bool)1, (bool)1, (bool)1, (bool)0, (bool)0>,"
            " flash::CollectiveEpilogueFwd<cute::tuple<cute::C<(int)128>, cute::C<(int)128>,"
            " cute::C<(int)128>>, cute::tuple<cute::C<(int)1>, cute::C<(int)1>, cute::C<(int)1>>,"
            " cutlass::bfloat16_t, cutlass::arch::Sm90, (int)256, (bool)1, (bool)1, (bool)0,"
            " (bool)0>, flash::VarlenDynamicPersistentTileScheduler<(int)128, (int)256, (int)128,"
            " (bool)0, (bool)1, (bool)1>>>>(T1::Params)"
        ),
        "device_kernel",
        22_000,
    ),
    "fi_prefill": (
        (
            "void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<"
            "(flashinfer::MaskMode)2,"
            " (unsigned int)16, (unsigned int)1, (unsigned int)8, (unsigned int)8, (unsigned int)8,"
            " (unsigned int)1, (unsigned int)4, (flashinfer::PosEncodingMode)0, __nv_bfloat16,"
            " __nv_bfloat16, __nv_bfloat16, float, int, flashinfer::DefaultAttention<(bool)1,"
            " (bool)0, (bool)0, (bool)0>>, flashinfer::PagedParams<__nv_bfloat16, __nv_bfloat16,"
            " __nv_bfloat16, int>>(T2)"
        ),
        "BatchPrefillWithPagedKVCacheKernel",
        20_000,
    ),
    "fi_decode": (
        (
            "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0,"
            " (unsigned int)2, (unsigned int)2, (unsigned int)8, (unsigned int)16, (unsigned int)1,"
            " (unsigned int)8, flashinfer::DefaultAttention<(bool)0, (bool)0, (bool)0, (bool)0>,"
            " flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>(T9)"
        ),
        "BatchDecodeWithPagedKVCacheKernel",
        9_000,
    ),
    "moe_gate": (
        (
            "void sglang::moe::topkGatingSoftmax<(int)8, (int)256, (int)4, (int)16, (int)32, int,"
            " __nv_bfloat16>(const T7 *, const bool *, float *, int, T6 *, int *, int, int, int,"
            " bool, float)"
        ),
        "topkGatingSoftmax",
        4_000,
    ),
    "moe_align": (
        (
            "void moe_align_block_size_kernel<int>(const T1 *, int *, int *, int *, int, int, int,"
            " int, unsigned long, int *)"
        ),
        "moe_align_block_size_kernel",
        6_000,
    ),
    "fused_moe": ("fused_moe_kernel", "fused_moe_kernel", 55_000),
    "act_mul": (
        (
            "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(T1 *, const T1"
            " *, int)"
        ),
        "act_and_mul_kernel",
        4_000,
    ),
    "moe_sum": (
        "void moe_sum_reduce_kernel<__nv_bfloat16, (int)8>(const T1 *, T1 *, long, int, float)",
        "moe_sum_reduce_kernel",
        4_000,
    ),
    "allreduce": (
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
        24_000,
    ),
    "add": (
        (
            "void at::native::vectorized_elementwise_kernel<(int)4,"
            " at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned"
            " long)3>>(int, T2, T3)"
        ),
        "vectorized_elementwise_kernel",
        2_500,
    ),
    "index": (
        (
            "void at::native::index_elementwise_kernel<(int)128, (int)4, void"
            " at::native::gpu_index_kernel<void"
            " at::native::index_kernel_impl<at::native::OpaqueType<(int)8>>(at::TensorIteratorBase"
            " &, c10::ArrayRef<long>, c10::ArrayRef<long>)::[lambda(char *, const char *, long)"
            " (instance 1)]>(at::TensorIteratorBase &, c10::ArrayRef<long>, c10::ArrayRef<long>,"
            " const T1 &, bool)::[lambda(int) (instance 1)]>(long, T3)"
        ),
        "index_elementwise_kernel",
        3_000,
    ),
    "argmax": (
        (
            "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float,"
            " at::native::ArgMaxOps<float>, unsigned int, long, (int)4, (int)4>>(T3)"
        ),
        "reduce_kernel",
        8_000,
    ),
    "build_tree": (
        (
            "build_tree_efficient(long *, long *, int *, long *, long *, long *, long *, long *,"
            " int, int, int)"
        ),
        "build_tree_efficient",
        5_000,
    ),
    "verify_tree": (
        (
            "void VerifyTreeGreedy<int, long>(T2 *, T2 *, T2 *, T2 *, T2 *, T2 *, T2 *, T2 *,"
            " unsigned int, unsigned int, unsigned int)"
        ),
        "VerifyTreeGreedy",
        6_000,
    ),
    "assign_cache": ("assign_extend_cache_locs", "assign_extend_cache_locs", 3_000),
}

TRITON = {"fused_moe", "assign_cache"}  # launched with cuLaunchKernelEx (driver API), like NCCL
DRIVER_LAUNCHED = TRITON | {"allreduce"}

LAUNCH_KERNEL = "cudaLaunchKernel_v7000"
LAUNCH_EX = "cuLaunchKernelEx"
GRAPH_LAUNCH = "cudaGraphLaunch_v10000"
MEMCPY_ASYNC = "cudaMemcpyAsync_v3020"
STREAM_SYNC = "cudaStreamSynchronize_v3020"
NOISE_APIS = (
    "cudaStreamIsCapturing_v10000",
    "cudaEventRecord_v3020",
    "cudaStreamGetCaptureInfo_v2_v11030",
)

EVENT_CLASS_RUNTIME = 0
EVENT_CLASS_DRIVER = 1
NVTX_PUSHPOP = 59
NVTX_DOMAIN_CREATE = 75
DOMAIN_ID = 1
COPY_HTOD, COPY_DTOH = 1, 2
