"""Vendor the source a hook preset names from one release wheel, for the network-free preset tests.

    python tests/data/sglang/vendor.py sglang 0.5.23            # pip download, then extract
    python tests/data/sglang/vendor.py transformers 5.17.0 --wheel /path/to/transformers-5.17.0-py3-none-any.whl

Writes ``tests/data/<package>/<version>/``: only the modules the preset's targets and bindings
live in (as they are in the wheel, byte for byte), the wheel's license file, and PROVENANCE.md
(version, wheel name and sha256, every file with its sha256, the preset targets it defines).
Run by a maintainer when adding a version; the tests never touch the network.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from verifyprof.capture.presets import load_preset  # noqa: E402
from verifyprof.capture.source_check import SourceTree, present_targets  # noqa: E402

PRESET_OF = {"sglang": "sglang", "transformers": "hf-assisted"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vendor(package: str, version: str, wheel: Path, out_root: Path) -> Path:
    preset = load_preset(PRESET_OF[package])
    modules = sorted({alt.target.module for e in preset.entries for alt in e.alternatives}
                     | {b.module for e in preset.entries for alt in e.alternatives for b in alt.bindings})
    out = out_root / package / version
    out.mkdir(parents=True, exist_ok=False)
    files: list[tuple[str, str]] = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        built = "-".join(f"{x:02d}" for x in max(i.date_time for i in archive.infolist())[:3])
        for module in modules:
            base = module.replace(".", "/")
            for candidate in (f"{base}.py", f"{base}/__init__.py"):
                if candidate in names:
                    data = archive.read(candidate)
                    (out / candidate).parent.mkdir(parents=True, exist_ok=True)
                    (out / candidate).write_bytes(data)
                    files.append((candidate, sha256(data)))
                    break
        licenses = sorted(n for n in names if re.search(r"\.dist-info/(licenses/)?LICENSE[^/]*$", n))
        for name in licenses[:1]:
            (out / "LICENSE").write_bytes(archive.read(name))
    present = present_targets(preset, SourceTree(out))
    lines = [
        f"# {package} {version}: vendored source for the `{preset.name}` hook preset test",
        "",
        f"- wheel: `{wheel.name}` (PyPI), sha256 `{sha256(wheel.read_bytes())}`, files dated {built}",
        f"- license: Apache License 2.0 (the wheel's license file, copied to `LICENSE`); the files below are",
        f"  unmodified copies from the wheel, vendored only so the tests can read them without network.",
        f"- made by `python tests/data/sglang/vendor.py {package} {version}`",
        "",
        "## Files (sha256)",
        "",
        *[f"- `{name}` `{digest}`" for name, digest in files],
        "",
        f"## `{preset.name}` preset targets defined in this version",
        "",
        *[f"- {phase}: `{target}`" for phase, _, target in (line.partition(": ") for line in present)],
        "",
    ]
    (out / "PROVENANCE.md").write_text("\n".join(lines))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("package", choices=sorted(PRESET_OF))
    parser.add_argument("version")
    parser.add_argument("--wheel", type=Path, help="an already downloaded wheel (default: pip download)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", f"{args.package}=={args.version}", "--no-deps",
                            "-d", tmp, "-q"], check=True)
            wheel = next(Path(tmp).glob("*.whl"))
        print(vendor(args.package, args.version, wheel, REPO / "tests" / "data"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
