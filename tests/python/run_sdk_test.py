#!/usr/bin/python3
"""The Python SDK test (ctest PythonSdkTest).

  /usr/bin/python3 tests/python/run_sdk_test.py --build-dir build

1. Makes a venv in BUILD/python-sdk-test/venv with Debian's
   `/usr/bin/python3 -m venv --system-site-packages` (kept between runs).
2. Installs the SDK there as a user would, `pip install --no-deps
   --no-build-isolation`, from a copy of client/python and proto/ in
   BUILD/python-sdk-test/src (so nothing is written into the source tree);
   its build step generates the protobuf and gRPC modules.
3. Runs tests/python/sdk_test.py with the venv's python: the builder, the
   graph JSON format, superoptimize on the CPU backend, typed errors, jobs,
   workers, chips, tokens and roofline plots (the SDK's and yirage-client's;
   the plots themselves skip without python3-matplotlib), against a real
   yirage-server.

Exit 0 = pass, 1 = fail, 77 = skipped (python3-grpcio, python3-protobuf,
python3-numpy or the venv module missing).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM_PYTHON = "/usr/bin/python3"


def skip(why):
    print("SKIPPED: " + why, flush=True)
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    bin_dir = os.path.join(build, "bin")
    for b in ("yirage-server", "yirage-worker", "yirage-client"):
        if not os.path.exists(os.path.join(bin_dir, b)):
            print("FAIL: %s not built in %s" % (b, bin_dir))
            return 1
    for module, package in (("grpc", "python3-grpcio"), ("google.protobuf", "python3-protobuf"),
                            ("numpy", "python3-numpy"), ("setuptools", "python3-setuptools"),
                            ("ensurepip", "python3-venv")):
        p = subprocess.run([SYSTEM_PYTHON, "-c", "import " + module], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if p.returncode != 0:
            skip("%s cannot import %s: install Debian's %s (apt-get install -y %s; "
                 "scripts/install-deps.sh installs it)" % (SYSTEM_PYTHON, module, package, package))

    root = os.path.join(build, "python-sdk-test")
    venv = os.path.join(root, "venv")
    py = os.path.join(venv, "bin", "python")
    t0 = time.monotonic()
    if subprocess.run([py, "-c", "import grpc, pip"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0 if os.path.exists(py) else True:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.check_call([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv])
    src = os.path.join(root, "src")
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(os.path.join(SOURCE_DIR, "client", "python"),
                    os.path.join(src, "client", "python"),
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "v1"))
    shutil.copytree(os.path.join(SOURCE_DIR, "proto"), os.path.join(src, "proto"))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.check_call([py, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
                           "--no-build-isolation", os.path.join(src, "client", "python")],
                          env=env)
    print("venv and pip install: %.1f s" % (time.monotonic() - t0), flush=True)
    env = dict(os.environ, YIRAGE_BIN_DIR=bin_dir)
    env.pop("PYTHONPATH", None)
    # Run from a folder without a `yirage` directory, so the installed
    # package (not the source tree) is what gets imported.
    p = subprocess.run([py, os.path.join(SOURCE_DIR, "tests", "python", "sdk_test.py")],
                       cwd=root, env=env)
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
