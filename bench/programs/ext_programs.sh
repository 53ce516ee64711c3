#!/bin/bash
# The two programs of issue 41's external proof, extracted at pinned commits into .ext/ (ignored:
# their code is not committed here). Needs the bare mirrors that `fetch` made:
#   /work/.mirror/pytorch-labs+gpt-fast/repo, /work/.mirror/phillip-kravtsov+gpt-fast/repo
# (A) .ext/gptfast: pytorch-labs/gpt-fast at bc04265 (2024-08-22), batch-1 speculative decoding,
#     draft count --speculate_k. Not 32971d3 (2024-09-15, the mirror's head): from 61c193d ("Add
#     support for batched generation") its speculative_decode raises on every device
#     (torch.cat of cur_token.view(1) with [k, 1] draft tokens: "Tensors must have same number of
#     dimensions"); bc04265 is the last commit before that change.
# (B) .ext/gptfast-batched: phillip-kravtsov/gpt-fast at 6f68835, batched speculative decoding,
#     --batch_size and --speculate_k.
# Usage (repo root): bash bench/programs/ext_programs.sh [MIRRORS]   (MIRRORS: /work/.mirror)
set -euo pipefail
mirrors=${1:-/work/.mirror}
root=$(git rev-parse --show-toplevel)
common=$(git rev-parse --git-common-dir)
grep -qx '/.ext/' "$common/info/exclude" 2>/dev/null || echo '/.ext/' >> "$common/info/exclude"
extract() {  # NAME MIRROR COMMIT
    local dest="$root/.ext/$1"
    rm -rf "$dest" && mkdir -p "$dest"
    git --git-dir="$mirrors/$2/repo" archive "$3" | tar -x -C "$dest"
    echo "$2 $3" > "$dest/PINNED"
    echo "ext_programs: .ext/$1 <- $2 at $3"
}
extract gptfast pytorch-labs+gpt-fast bc04265
extract gptfast-batched phillip-kravtsov+gpt-fast 6f68835
