"""The YiRage Python SDK (package `yirage`).

Install (Debian 12: python3-grpcio, python3-protobuf, python3-setuptools; no
package index is needed):

    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-deps --no-build-isolation ./client/python

The protobuf and gRPC modules are generated from proto/yirage/v1/*.proto at
build time (build_py runs protoc with grpc_python_plugin) into the package's
`yirage/v1/` folder, so that protoc's own imports (`from yirage.v1 import
graph_pb2`) resolve inside the package. Nothing generated is committed.

Environment: YIRAGE_PROTO_DIR (default: ../../proto beside this file),
YIRAGE_PROTOC (default: /usr/bin/protoc, else protoc on PATH),
YIRAGE_GRPC_PYTHON_PLUGIN (default: /usr/bin/grpc_python_plugin, else on PATH).
"""

import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["graph", "plan", "job", "worker", "backend", "registry"]


def _tool(env, default, name):
    path = os.environ.get(env)
    if path:
        return path
    if os.path.exists(default):
        return default
    found = shutil.which(name)
    if found:
        return found
    raise RuntimeError(
        "yirage SDK build: %s not found (Debian: apt-get install protobuf-compiler "
        "protobuf-compiler-grpc), or set %s" % (name, env))


def generate_stubs(out_dir):
    """protoc --python_out --grpc_python_out for proto/yirage/v1/*.proto into
    out_dir (the folder holding the `yirage` package)."""
    proto_dir = os.environ.get("YIRAGE_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
    proto_dir = os.path.abspath(proto_dir)
    sources = [os.path.join(proto_dir, "yirage", "v1", p + ".proto") for p in PROTOS]
    missing = [s for s in sources if not os.path.exists(s)]
    if missing:
        raise RuntimeError("yirage SDK build: proto files not found: %s (set YIRAGE_PROTO_DIR "
                           "to the repository's proto/ folder)" % ", ".join(missing))
    protoc = _tool("YIRAGE_PROTOC", "/usr/bin/protoc", "protoc")
    plugin = _tool("YIRAGE_GRPC_PYTHON_PLUGIN", "/usr/bin/grpc_python_plugin",
                   "grpc_python_plugin")
    pkg = os.path.join(out_dir, "yirage", "v1")
    os.makedirs(pkg, exist_ok=True)
    for stale in glob.glob(os.path.join(pkg, "*_pb2*.py")):
        os.remove(stale)
    subprocess.check_call([protoc, "--proto_path=" + proto_dir, "--python_out=" + out_dir,
                           "--grpc_python_out=" + out_dir,
                           "--plugin=protoc-gen-grpc_python=" + plugin] + sources)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write('"""Generated from proto/yirage/v1 at build time (protoc, '
                'grpc_python_plugin)."""\n')


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        generate_stubs(self.build_lib)


setup(
    name="yirage",
    version="0.1.0",
    description="Python SDK for the YiRage kernel superoptimization service",
    packages=["yirage"],
    python_requires=">=3.9",
    # Debian packages (python3-grpcio, python3-protobuf); not declared as
    # requirements because the install uses --no-deps.
    cmdclass={"build_py": BuildPyWithStubs},
)
