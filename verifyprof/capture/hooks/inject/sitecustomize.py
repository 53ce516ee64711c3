"""verifyprof's sitecustomize: installs $VERIFYPROF_HOOKS in every Python process of a capture.

``verifyprof capture`` puts this directory first on ``PYTHONPATH`` so that processes a server
spawns (SGLang's scheduler/TP ranks are ``multiprocessing`` spawn children) patch their targets
at start-up. Without ``VERIFYPROF_HOOKS`` it only chains: the ``sitecustomize`` it shadows (the
next one on ``sys.path``) still runs, first, exactly once. Nothing here may stop the interpreter.
"""

import os
import sys


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_verifyprof_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _import_hooks():
    """The hooks of the verifyprof this file belongs to (the capture's own), not of another copy
    the process can import: a server's environment may hold an older verifyprof, whose hooks
    would read the capture's settings by other rules. Loaded from this copy's files where the
    importable one is another, without putting the capture environment's site-packages on this
    interpreter's path."""
    import importlib.util

    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )  # verifyprof/capture/hooks/inject
    try:
        found = importlib.util.find_spec("verifyprof")
    except (ImportError, ValueError):
        found = None
    origin = getattr(found, "origin", None)
    if origin and os.path.realpath(os.path.dirname(origin)) == os.path.realpath(root):
        from verifyprof.capture.hooks import api as hooks

        return hooks
    spec = importlib.util.spec_from_file_location(
        "verifyprof", os.path.join(root, "__init__.py"), submodule_search_locations=[root]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"verifyprof's files are not in {root}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["verifyprof"] = module
    spec.loader.exec_module(module)
    from verifyprof.capture.hooks import api as hooks

    return hooks


try:
    _chain()
finally:
    if os.environ.get("VERIFYPROF_HOOKS", "").strip():
        try:
            _import_hooks().install_from_env()
        except Exception as _exc:  # never stop the interpreter for profiling
            sys.stderr.write(f"verifyprof: hooks not installed in pid {os.getpid()}: {_exc}\n")
