#!/usr/bin/python3
"""Runs the Kubernetes manifests' processes (issue 20): the scheduler and the
CPU worker exactly as the rendered manifests start them, outside a cluster.

  /usr/bin/python3 tests/deploy/run_manifests_test.py [--bin-dir build/bin]
      [--kustomization deploy/kubernetes/overlays/dev ...] [--keep]

For each kustomization (default: overlays/dev, then base):
1. `kubectl kustomize` renders it; the StatefulSet yirage-server and the
   Deployment yirage-worker-cpu are taken from the output.
2. Each container's process is built the way the kubelet and the container
   runtime build it: the image's ENTRYPOINT/CMD/ENV/WORKDIR (from the
   Dockerfile stage the image is named after, deploy/docker/Dockerfile),
   `command`/`args`, the Service environment variables, `envFrom` and `env`
   (configMapKeyRef / configMapRef from the rendered ConfigMaps, secretKeyRef
   / secretRef from stand-in Secrets made the way docs/deploy.md says), and
   $(VAR) expansion. Then only this is rewritten: the image's binaries and
   libraries (/opt/yirage/bin, /opt/yirage/lib) to --bin-dir; every
   `host:containerPort` the server listens on to 127.0.0.1 and a free port;
   an address naming a Service (`yirage-worker-api:50052`) to 127.0.0.1 and
   the port its targetPort was given; every other absolute path into a
   per-pod folder of a temp folder that stands for the container's root
   filesystem. That root is read-only to the process; each volumeMount is a
   folder in it made like the volume (emptyDir 0777, the PersistentVolume
   with fsGroup's group and setgid, a Secret's files with its defaultMode and
   fsGroup's group). Run as root, the test starts each process as the pod's
   runAsUser/runAsGroup with fsGroup and supplementalGroups, so a path the
   manifests would write outside a writable volume fails here as it would in
   the cluster. The final command lines are printed.
3. Starts the server, runs its startupProbe until it succeeds (gRPC probes
   are grpc.health.v1.Health/Check calls, encoded by hand: plaintext HTTP/2
   from the standard library), then its readinessProbe and livenessProbe;
   checks that every containerPort listens, every Service port of the server
   answers (gRPC health for appProtocol grpc, GET /metrics for the
   Prometheus port), and that an unknown health service name is not SERVING
   (so the health check itself can fail). Starts the worker.
4. Submits examples/graphs/softmax.json with yirage-client (an admin token
   of the stand-in tokens file) and waits for SUCCEEDED; the probes again.
5. SIGTERMs both processes at once (as deleting the pods does) and checks
   that each exits 0 within its pod's terminationGracePeriodSeconds.

Only the standard library plus Debian's python3-yaml (run it with
/usr/bin/python3). Exit 0 = pass, 1 = fail, 77 = skipped (no kubectl, or no
python3-yaml).
"""

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S_DIR = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
DOCKERFILE = os.path.join(SOURCE_DIR, "deploy", "docker", "Dockerfile")
GRAPH = os.path.join(SOURCE_DIR, "examples", "graphs", "softmax.json")
SERVER = ("StatefulSet", "yirage-server")
WORKER = ("Deployment", "yirage-worker-cpu")
# Where the images keep what deploy/docker/collect.sh gathers: programs in
# bin/, the shared libraries and backends in lib/. Both are --bin-dir here.
IMAGE_PREFIX = "/opt/yirage"
# Paths of the image's system that the process reads as they are on this host.
SYSTEM_PREFIXES = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ssl", "/dev", "/proc", "/sys")
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LISTEN_HOSTS = ("0.0.0.0", "[::]", "::", "", "127.0.0.1", "localhost", "[::1]")
JOB_TIMEOUT_S = 60
# Every job wait ends by then, so that a failing run reports before ctest's
# TIMEOUT (180 s) kills it.
TOTAL_LIMIT_S = 150
STARTUP_CAP_S = 60

START = time.monotonic()


def log(msg):
    print("[%6.1fs] %s" % (time.monotonic() - START, msg), flush=True)


class Skip(Exception):
    pass


class Fail(Exception):
    pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


# ---------------------------------------------------------------- gRPC health
# grpc.health.v1.Health/Check over plaintext HTTP/2 (prior knowledge, as the
# kubelet's gRPC probe speaks it), hand-encoded: HealthCheckRequest{string
# service = 1}, HealthCheckResponse{ServingStatus status = 1}, SERVING = 1.

SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
HPACK_STATIC = [
    None, (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"), (":status", "200"),
    (":status", "204"), (":status", "206"), (":status", "304"), (":status", "400"),
    (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""),
    ("accept", ""), ("access-control-allow-origin", ""), ("age", ""), ("allow", ""),
    ("authorization", ""), ("cache-control", ""), ("content-disposition", ""),
    ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""),
    ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""),
    ("max-forwards", ""), ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""),
    ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""), ("set-cookie", ""),
    ("strict-transport-security", ""), ("transfer-encoding", ""), ("user-agent", ""),
    ("vary", ""), ("via", ""), ("www-authenticate", ""),
]


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """Literal header field without indexing, new name, no Huffman."""
    n, v = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(n), 7) + n + hpack_int(len(v), 7) + v


class HpackDecoder:
    """Enough HPACK to read grpc-status in a response, for the diagnosis only
    (Huffman-coded strings are shown as <huffman>; the verdict comes from the
    response message)."""

    def __init__(self):
        self.dynamic = []

    def _int(self, data, i, prefix_bits):
        limit = (1 << prefix_bits) - 1
        value = data[i] & limit
        i += 1
        if value < limit:
            return value, i
        shift = 0
        while True:
            b = data[i]
            i += 1
            value += (b & 127) << shift
            shift += 7
            if not b & 128:
                return value, i

    def _str(self, data, i):
        huffman = bool(data[i] & 128)
        n, i = self._int(data, i, 7)
        raw = data[i:i + n]
        return ("<huffman>" if huffman else raw.decode("latin-1")), i + n, n

    def _entry(self, index):
        if index < len(HPACK_STATIC):
            return HPACK_STATIC[index]
        j = index - len(HPACK_STATIC)
        return self.dynamic[j][:2] if j < len(self.dynamic) else ("<?>", "<?>")

    def decode(self, data):
        headers = []
        i = 0
        while i < len(data):
            b = data[i]
            if b & 128:  # indexed
                index, i = self._int(data, i, 7)
                headers.append(self._entry(index))
            elif b & 64 or (b & 240) in (0, 16):  # literal
                incremental = bool(b & 64)
                index, i = self._int(data, i, 6 if incremental else 4)
                if index:
                    name = self._entry(index)[0]
                    nlen = len(name)
                else:
                    name, i, nlen = self._str(data, i)
                value, i, vlen = self._str(data, i)
                headers.append((name, value))
                if incremental:
                    self.dynamic.insert(0, (name, value, nlen + vlen + 32))
            elif (b & 224) == 32:  # dynamic table size update
                size, i = self._int(data, i, 5)
                while self.dynamic and sum(e[2] for e in self.dynamic) > size:
                    self.dynamic.pop()
            else:
                break
        return headers


def h2_frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def grpc_health_check(port, service="", timeout=3.0, host="127.0.0.1"):
    """(status name or None, detail) of grpc.health.v1.Health/Check."""
    path = "/grpc.health.v1.Health/Check"
    svc = service.encode()
    request = (b"\x0a" + hpack_int(len(svc), 7) + svc) if svc else b""
    headers = b"".join(hpack_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", path),
        (":authority", "%s:%d" % (host, port)), ("content-type", "application/grpc"),
        ("te", "trailers"), ("user-agent", "yirage-run-manifests-test")))
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        return None, "connect %s:%d: %s" % (host, port, e)
    data, trailers, buf = b"", [], b""
    hpack = HpackDecoder()
    block = b""
    try:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0) +
                     h2_frame(1, 4, 1, headers) +
                     h2_frame(0, 1, 1, b"\x00" + struct.pack(">I", len(request)) + request))
        ended = False
        while not ended:
            while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None, "no answer in %.1f s" % timeout
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    return None, "connection closed (%d bytes of response)" % len(data)
                buf += chunk
            n = int.from_bytes(buf[:3], "big")
            ftype, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff
            payload, buf = buf[9:9 + n], buf[9 + n:]
            if ftype in (0, 1) and flags & 8:  # PADDED
                payload = payload[1:len(payload) - payload[0]]
            if ftype == 0 and stream == 1:
                data += payload
                ended = bool(flags & 1)
            elif ftype in (1, 9) and stream == 1:
                if ftype == 1 and flags & 32:  # PRIORITY
                    payload = payload[5:]
                block += payload
                if flags & 4:  # END_HEADERS
                    trailers += hpack.decode(block)
                    block = b""
                ended = bool(flags & 1) if ftype == 1 else ended
            elif ftype == 4 and not flags & 1:
                sock.sendall(h2_frame(4, 1, 0))
            elif ftype == 6 and not flags & 1:
                sock.sendall(h2_frame(6, 1, 0, payload))
            elif ftype == 3 and stream == 1:
                return None, "stream reset (error %d)" % int.from_bytes(payload[:4], "big")
            elif ftype == 7:
                return None, "GOAWAY (error %d)" % int.from_bytes(payload[4:8], "big")
    except OSError as e:
        return None, "%s:%d: %s" % (host, port, e)
    finally:
        sock.close()
    hdrs = dict(trailers)
    grpc = "grpc-status %s %s" % (hdrs.get("grpc-status", "?"), hdrs.get("grpc-message", ""))
    if len(data) < 5:
        return None, "no response message (%s)" % grpc.strip()
    msg = data[5:5 + int.from_bytes(data[1:5], "big")]
    status, i = 0, 0
    while i < len(msg):  # field 1, varint
        key = msg[i]
        i += 1
        value, shift = 0, 0
        while i < len(msg):
            b = msg[i]
            i += 1
            value |= (b & 127) << shift
            shift += 7
            if not b & 128:
                break
        if key == 0x08:
            status = value
    return SERVING_STATUS.get(status, str(status)), grpc.strip()


# ------------------------------------------------------------------ rendering

def render(kdir, yaml):
    p = subprocess.run(["kubectl", "kustomize", kdir], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if p.returncode != 0:
        raise Fail("kubectl kustomize %s: %s" % (kdir, p.stderr.strip()))
    return [o for o in yaml.safe_load_all(p.stdout) if o]


def find(objs, kind, name):
    for o in objs:
        if o.get("kind") == kind and o["metadata"]["name"] == name:
            return o
    return None


def parse_dockerfile(path):
    """{stage: {entrypoint, cmd, env, workdir, user, home}} of a Dockerfile."""
    text = re.sub(r"\\\n", " ", read(path))
    stages, cur = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr, rest = instr.upper(), rest.strip()
        if instr == "FROM":
            words = rest.split()
            base = words[0]
            cur = dict(stages[base]) if base in stages else {
                "entrypoint": None, "cmd": None, "env": {"PATH": DEBIAN_PATH}, "workdir": "/",
                "user": None, "home": {}}
            cur["env"] = dict(cur["env"])
            cur["home"] = dict(cur["home"])
            if len(words) >= 3 and words[1].upper() == "AS":
                stages[words[2]] = cur
        elif cur is None:
            continue
        elif instr == "ENV":
            for word in shlex.split(rest):
                k, _, v = word.partition("=")
                cur["env"][k] = re.sub(r"\$\{?(\w+)\}?", lambda m: cur["env"].get(m.group(1), ""), v)
        elif instr in ("ENTRYPOINT", "CMD"):
            cur[instr.lower()] = json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest]
            if instr == "ENTRYPOINT":
                cur["cmd"] = None  # a new ENTRYPOINT resets an inherited CMD
        elif instr == "WORKDIR":
            cur["workdir"] = os.path.join(cur["workdir"], rest)
        elif instr == "USER":
            cur["user"] = rest
        elif instr == "RUN":
            m = re.search(r"useradd\b.*?--uid\s+(\d+)", rest)
            h = re.search(r"useradd\b.*?--home-dir\s+(\S+)", rest)
            if m and h:
                cur["home"][int(m.group(1))] = h.group(1)
    return stages


def expand(value, env):
    """Kubernetes' $(VAR) expansion: defined variables are replaced, $$ is $,
    anything else is left as written."""
    def repl(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", repl, value)


def service_env(services):
    """The variables the kubelet gives every container (enableServiceLinks),
    with stand-in cluster IPs."""
    env = {}
    allsvc = [("kubernetes", [{"name": "https", "port": 443, "protocol": "TCP"}])] + \
        [(s["metadata"]["name"], s["spec"].get("ports", [])) for s in services]
    for n, (name, ports) in enumerate(allsvc):
        if not ports:
            continue
        ip = "10.96.0.%d" % (n + 1)
        up = name.upper().replace("-", "_")
        env[up + "_SERVICE_HOST"] = ip
        env[up + "_SERVICE_PORT"] = str(ports[0]["port"])
        env[up + "_PORT"] = "%s://%s:%d" % (ports[0].get("protocol", "TCP").lower(), ip,
                                            ports[0]["port"])
        for p in ports:
            proto = p.get("protocol", "TCP")
            if p.get("name"):
                env["%s_SERVICE_PORT_%s" % (up, p["name"].upper().replace("-", "_"))] = \
                    str(p["port"])
            pre = "%s_PORT_%d_%s" % (up, p["port"], proto)
            env[pre] = "%s://%s:%d" % (proto.lower(), ip, p["port"])
            env[pre + "_PROTO"] = proto.lower()
            env[pre + "_PORT"] = str(p["port"])
            env[pre + "_ADDR"] = ip
    return env


class Pod:
    """One container of a workload, turned into a local process."""

    def __init__(self, ctx, workload, pod_name):
        self.ctx = ctx
        self.workload = workload
        self.kind, self.name = workload["kind"], workload["metadata"]["name"]
        self.pod_name = pod_name
        tmpl = workload["spec"]["template"]
        self.labels = tmpl["metadata"].get("labels", {})
        self.annotations = tmpl["metadata"].get("annotations", {})
        self.spec = tmpl["spec"]
        containers = self.spec["containers"]
        if len(containers) != 1:
            raise Fail("%s/%s: %d containers; the test runs one" % (self.kind, self.name,
                                                                   len(containers)))
        self.c = containers[0]
        self.grace = int(self.spec.get("terminationGracePeriodSeconds", 30))
        self.root = os.path.join(ctx.work, pod_name, "rootfs")
        self.ports = {}       # containerPort -> local port
        self.port_names = {}  # name -> containerPort
        for p in self.c.get("ports", []):
            self.ports[int(p["containerPort"])] = free_port()
            if p.get("name"):
                self.port_names[p["name"]] = int(p["containerPort"])
        self.mounts = []      # (mountPath, readOnly)
        self.proc = None
        self.log_path = os.path.join(ctx.work, pod_name + ".log")

    def where(self):
        return "%s/%s container %s" % (self.kind, self.name, self.c["name"])

    def container_port(self, port):
        """A probe's or Service's port (number or name) as a containerPort."""
        if isinstance(port, str) and not port.isdigit():
            if port not in self.port_names:
                raise Fail("%s: no containerPort named %r" % (self.where(), port))
            return self.port_names[port]
        return int(port)

    def local_port(self, port):
        cp = self.container_port(port)
        if cp not in self.ports:
            raise Fail("%s: port %s is not one of its containerPorts %s"
                       % (self.where(), port, sorted(self.ports)))
        return self.ports[cp]

    # --- the image, the volumes, the environment
    def image_stage(self):
        image = self.c["image"]
        base = image.split("@")[0].split("/")[-1].split(":")[0]
        stage = base[len("yirage-"):] if base.startswith("yirage-") else base
        stages = self.ctx.stages
        if stage not in stages:
            raise Fail("%s: image %s: no stage %r in %s" % (self.where(), image, stage,
                                                           os.path.relpath(DOCKERFILE, SOURCE_DIR)))
        return stage, stages[stage]

    def make_rootfs(self, image):
        """The container's root: a folder the process may not write (as
        readOnlyRootFilesystem), with the image's folders it uses and each
        volume mounted where the manifest mounts it."""
        sc = self.spec.get("securityContext", {})
        csc = self.c.get("securityContext", {})
        fs_group = sc.get("fsGroup")
        if not csc.get("readOnlyRootFilesystem"):
            self.ctx.fails.add("%s: readOnlyRootFilesystem is not set" % self.where())
        dirs = {image["workdir"], "/tmp"} | set(image["home"].values())
        for d in sorted(dirs):
            os.makedirs(self.host_path(d), exist_ok=True)
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        for t in self.workload["spec"].get("volumeClaimTemplates", []):
            volumes[t["metadata"]["name"]] = {"name": t["metadata"]["name"],
                                              "persistentVolumeClaim": {}}
        mounted = []
        for m in self.c.get("volumeMounts", []):
            v = volumes.get(m["name"])
            if v is None:
                raise Fail("%s: volumeMount %s: no such volume" % (self.where(), m["name"]))
            if m.get("subPath"):
                raise Fail("%s: volumeMount %s: subPath is not supported by this test"
                           % (self.where(), m["name"]))
            path = self.host_path(m["mountPath"])
            if os.path.isdir(path):
                shutil.rmtree(path)
            os.makedirs(path)
            self.mounts.append((m["mountPath"], bool(m.get("readOnly"))))
            mounted.append((path, v, m))
        # Volume contents first (the folders become read-only below).
        for path, v, m in mounted:
            if "secret" in v or "configMap" in v:
                src = v.get("secret") or v.get("configMap")
                if "secret" in v:
                    data = self.ctx.secret(v["secret"]["secretName"], self.where())
                else:
                    cm = find(self.ctx.objs, "ConfigMap", src["name"])
                    if cm is None:
                        raise Fail("%s: ConfigMap %s is not in the rendered manifests"
                                   % (self.where(), src["name"]))
                    data = cm.get("data", {})
                items = src.get("items") or [{"key": k, "path": k} for k in data]
                for it in items:
                    if it["key"] not in data:
                        raise Fail("%s: volume %s: no key %r" % (self.where(), v["name"], it["key"]))
                    f = os.path.join(path, it["path"])
                    with open(f, "w") as out:
                        out.write(data[it["key"]])
                    mode = it.get("mode", src.get("defaultMode", 0o644))
                    if fs_group is not None and os.geteuid() == 0:
                        # The kubelet gives fsGroup's group read access to a
                        # read-only volume's files (SetVolumeOwnership).
                        os.chown(f, 0, fs_group)
                        mode |= 0o440
                    os.chmod(f, mode)
            elif "emptyDir" not in v and "persistentVolumeClaim" not in v:
                raise Fail("%s: volume %s: type not supported by this test" % (self.where(),
                                                                              v["name"]))
        for d, _, _ in os.walk(self.root):  # the image's folders: read-only
            os.chmod(d, 0o555)
        for path, v, m in mounted:
            if "emptyDir" in v:
                os.chmod(path, 0o777)
            elif "persistentVolumeClaim" in v:
                if fs_group is not None and os.geteuid() == 0:
                    os.chown(path, 0, fs_group)
                    os.chmod(path, 0o2775)
                else:
                    os.chmod(path, 0o755)

    def host_path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def rewrite_path(self, path):
        if path == IMAGE_PREFIX or path.startswith(IMAGE_PREFIX + "/"):
            rest = path[len(IMAGE_PREFIX):].lstrip("/")
            sub = rest.split("/", 1)
            if sub[0] in ("bin", "lib"):
                return os.path.join(self.ctx.bin_dir, *sub[1:])
        if any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES):
            return path
        return self.host_path(path)

    def rewrite(self, value):
        """Only addresses and paths change (see the module's docstring)."""
        m = re.fullmatch(r"(--?[\w-]+=)?(.*)", value, re.S)
        pre, val = m.group(1) or "", m.group(2)
        a = re.fullmatch(r"(\[[0-9a-fA-F:]*\]|[A-Za-z0-9.-]*):(\d+)", val)
        if a:
            host, port = a.group(1), int(a.group(2))
            if host in LISTEN_HOSTS and port in self.ports:
                return pre + "127.0.0.1:%d" % self.ports[port]
            local = self.ctx.service_address(host, port, self.where())
            if local:
                return pre + local
            if host in LISTEN_HOSTS:
                self.ctx.fails.add("%s: %s listens on port %d, which is not one of its "
                                   "containerPorts %s" % (self.where(), value, port,
                                                          sorted(self.ports)))
            return value
        if val.startswith("/"):
            return pre + ":".join(self.rewrite_path(p) if p.startswith("/") else p
                                  for p in val.split(":"))
        return value

    def build(self):
        stage, image = self.image_stage()
        self.make_rootfs(image)
        sc = self.spec.get("securityContext", {})
        csc = self.c.get("securityContext", {})
        self.uid = csc.get("runAsUser", sc.get("runAsUser"))
        self.gid = csc.get("runAsGroup", sc.get("runAsGroup"))
        if (csc.get("runAsNonRoot") or sc.get("runAsNonRoot")) and not self.uid:
            self.ctx.fails.add("%s: runAsNonRoot without a runAsUser other than 0" % self.where())
        self.groups = ([sc["fsGroup"]] if "fsGroup" in sc else []) + \
            list(sc.get("supplementalGroups", []))
        env = dict(image["env"])
        env["HOSTNAME"] = self.pod_name
        env["HOME"] = image["home"].get(self.uid, "/")
        if self.spec.get("enableServiceLinks", True):
            env.update(self.ctx.service_env)
        for ef in self.c.get("envFrom", []):
            prefix = ef.get("prefix", "")
            if "configMapRef" in ef:
                ref = ef["configMapRef"]
                cm = find(self.ctx.objs, "ConfigMap", ref["name"])
                if cm is None:
                    if ref.get("optional"):
                        continue
                    raise Fail("%s: envFrom ConfigMap %s is not in the rendered manifests"
                               % (self.where(), ref["name"]))
                data = cm.get("data", {})
            else:
                data = self.ctx.secret(ef["secretRef"]["name"], self.where())
            for k, v in data.items():
                env[prefix + k] = v
        for e in self.c.get("env", []):
            if "value" in e:
                env[e["name"]] = expand(str(e["value"]), env)
                continue
            vf = e.get("valueFrom", {})
            if "configMapKeyRef" in vf:
                ref = vf["configMapKeyRef"]
                cm = find(self.ctx.objs, "ConfigMap", ref["name"])
                if cm is None or ref["key"] not in cm.get("data", {}):
                    if ref.get("optional"):
                        continue
                    raise Fail("%s: env %s: ConfigMap %s key %s is not in the rendered "
                               "manifests" % (self.where(), e["name"], ref["name"], ref["key"]))
                env[e["name"]] = cm["data"][ref["key"]]
            elif "secretKeyRef" in vf:
                ref = vf["secretKeyRef"]
                data = self.ctx.secret(ref["name"], self.where())
                if ref["key"] not in data:
                    raise Fail("%s: env %s: Secret %s has no key %s" % (self.where(), e["name"],
                                                                       ref["name"], ref["key"]))
                env[e["name"]] = data[ref["key"]]
            elif "fieldRef" in vf:
                field = vf["fieldRef"]["fieldPath"]
                env[e["name"]] = {"metadata.name": self.pod_name,
                                  "metadata.namespace": self.ctx.namespace,
                                  "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1",
                                  "spec.nodeName": socket.gethostname()}.get(field, "")
            else:
                raise Fail("%s: env %s: valueFrom %s not supported by this test"
                           % (self.where(), e["name"], sorted(vf)))
        if "command" in self.c:
            argv = list(self.c["command"]) + list(self.c.get("args", []))
        elif "args" in self.c:
            argv = list(image["entrypoint"] or []) + list(self.c["args"])
        else:
            argv = list(image["entrypoint"] or []) + list(image["cmd"] or [])
        if not argv:
            raise Fail("%s: no command (image stage %s has no ENTRYPOINT)" % (self.where(), stage))
        argv = [expand(a, env) for a in argv]
        unexpanded = [a for a in argv if re.search(r"\$\([A-Za-z_]", a)]
        if unexpanded:
            self.ctx.fails.add("%s: arguments refer to variables the container does not have: "
                               "%s" % (self.where(), " ".join(unexpanded)))
        self.argv = [self.rewrite(a) for a in argv]
        self.env = {k: self.rewrite(v) for k, v in env.items()}
        self.cwd = self.rewrite_path(self.c.get("workingDir", image["workdir"]))
        if not os.access(self.argv[0], os.X_OK):
            raise Fail("%s: %s (from %s) is not an executable" % (self.where(), self.argv[0],
                                                                 argv[0]))
        self.original_argv = argv

    def command_line(self):
        user = ""
        if self.ctx.as_user and self.uid is not None:
            user = "setpriv --reuid=%s --regid=%s --groups=%s " % (
                self.uid, self.gid if self.gid is not None else self.uid,
                ",".join(str(g) for g in self.groups) or "''")
        return "cd %s && %senv -i %s %s" % (
            shlex.quote(self.cwd), user,
            " ".join(shlex.quote("%s=%s" % kv) for kv in sorted(self.env.items())),
            shlex.join(self.argv))

    def start(self):
        out = open(self.log_path, "w")
        kw = {}
        if self.ctx.as_user and self.uid is not None:
            kw = {"user": self.uid, "group": self.gid if self.gid is not None else self.uid,
                  "extra_groups": self.groups}
        try:
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True, **kw)
        finally:
            out.close()
        self.ctx.pods.append(self)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class Failures:
    def __init__(self):
        self.items = []

    def add(self, msg):
        self.items.append(msg)
        log("FAIL: " + msg)


class Context:
    def __init__(self, objs, bin_dir, work, stages, fails, as_user):
        self.objs, self.bin_dir, self.work, self.stages = objs, bin_dir, work, stages
        self.fails, self.as_user = fails, as_user
        self.pods = []
        self.services = [o for o in objs if o.get("kind") == "Service"]
        self.service_env = service_env(self.services)
        ns = [o for o in objs if o.get("kind") == "Namespace"]
        self.namespace = ns[0]["metadata"]["name"] if ns else "default"
        # The stand-in Secrets, made the way docs/deploy.md says.
        self.admin_token = secrets.token_hex(16)
        self.worker_token = secrets.token_hex(16)
        self.secrets = {
            "yirage-auth-tokens": {"tokens": "%s admin ops\n%s worker workers\n"
                                             % (self.admin_token, self.worker_token)},
            "yirage-worker-token": {"token": self.worker_token},
        }
        self.targets = []  # Pods that Services select

    def secret(self, name, where):
        if name not in self.secrets:
            raise Fail("%s: Secret %s: the test has no stand-in for it (docs/deploy.md lists "
                       "the Secrets; add it to Context.secrets)" % (where, name))
        return self.secrets[name]

    def service(self, host):
        """The Service a DNS name names, or None."""
        for s in self.services:
            name = s["metadata"]["name"]
            ns = s["metadata"].get("namespace", self.namespace)
            if host in (name, "%s.%s" % (name, ns), "%s.%s.svc" % (name, ns),
                        "%s.%s.svc.cluster.local" % (name, ns)):
                return s
        return None

    def service_target(self, svc, port):
        """(Pod, targetPort) a Service port reaches."""
        sel = svc["spec"].get("selector", {})
        for sp in svc["spec"].get("ports", []):
            if int(sp["port"]) != int(port):
                continue
            for pod in self.targets:
                if sel and all(pod.labels.get(k) == v for k, v in sel.items()):
                    return pod, sp.get("targetPort", sp["port"])
            raise Fail("Service %s: its selector %s matches no pod this test runs"
                       % (svc["metadata"]["name"], sel))
        raise Fail("Service %s has no port %s" % (svc["metadata"]["name"], port))

    def service_address(self, host, port, where):
        svc = self.service(host)
        if svc is None:
            return None
        pod, target = self.service_target(svc, port)
        try:
            return "127.0.0.1:%d" % pod.local_port(target)
        except Fail as e:
            raise Fail("%s dials %s:%d: Service %s targetPort %s: %s"
                       % (where, host, port, svc["metadata"]["name"], target, e))


# -------------------------------------------------------------------- checks

def run_probe(ctx, pod, kind, probe):
    """(ok, detail) of one probe of the pod's container."""
    timeout = float(probe.get("timeoutSeconds", 1))
    if "grpc" in probe:
        port = pod.local_port(probe["grpc"]["port"])
        service = probe["grpc"].get("service", "")
        status, detail = grpc_health_check(port, service, timeout)
        what = "gRPC health %r on %s (127.0.0.1:%d)" % (service, probe["grpc"]["port"], port)
        return status == "SERVING", "%s: %s %s" % (what, status or "no answer", detail)
    if "httpGet" in probe:
        h = probe["httpGet"]
        port = pod.local_port(h["port"])
        url = "%s://127.0.0.1:%d%s" % (h.get("scheme", "HTTP").lower(), port, h.get("path", "/"))
        req = urllib.request.Request(url, headers={x["name"]: x["value"]
                                                   for x in h.get("httpHeaders", [])})
        try:
            import ssl
            ctx_ssl = ssl._create_unverified_context()
            with urllib.request.urlopen(req, timeout=timeout, context=ctx_ssl) as r:
                return 200 <= r.status < 400, "GET %s: %d" % (url, r.status)
        except urllib.error.HTTPError as e:
            return False, "GET %s: %d" % (url, e.code)
        except (urllib.error.URLError, OSError) as e:
            return False, "GET %s: %s" % (url, e)
    if "tcpSocket" in probe:
        port = pod.local_port(probe["tcpSocket"]["port"])
        try:
            socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
            return True, "TCP 127.0.0.1:%d accepts" % port
        except OSError as e:
            return False, "TCP 127.0.0.1:%d: %s" % (port, e)
    if "exec" in probe:
        argv = [pod.rewrite(expand(a, pod.env)) for a in probe["exec"]["command"]]
        kw = {}
        if ctx.as_user and pod.uid is not None:
            kw = {"user": pod.uid, "group": pod.gid or pod.uid, "extra_groups": pod.groups}
        try:
            p = subprocess.run(argv, env=pod.env, cwd=pod.cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, "exec %s: %s" % (shlex.join(argv), e)
        return p.returncode == 0, "exec %s: exit %d %s" % (shlex.join(argv), p.returncode,
                                                             p.stdout.strip()[-200:])
    raise Fail("%s: %s has no handler the test knows" % (pod.where(), kind))


def check_probes(ctx, pod, kinds, when):
    for kind in kinds:
        probe = pod.c.get(kind)
        if not probe:
            continue
        ok, detail = run_probe(ctx, pod, kind, probe)
        if ok:
            log("ok: %s %s %s" % (pod.name, kind, detail))
        else:
            ctx.fails.add("%s %s %s: %s" % (pod.name, kind, when, detail))


def wait_started(ctx, pod):
    """The startupProbe (or, without one, the readinessProbe) until it
    succeeds, as the kubelet would (polled faster, capped)."""
    probe = pod.c.get("startupProbe") or pod.c.get("readinessProbe")
    if not probe:
        return True
    limit = min(STARTUP_CAP_S, int(probe.get("initialDelaySeconds", 0)) +
                int(probe.get("periodSeconds", 10)) * int(probe.get("failureThreshold", 3)))
    deadline = time.monotonic() + limit
    detail = ""
    while time.monotonic() < deadline:
        if not pod.alive():
            ctx.fails.add("%s exited (%s) before its probe succeeded:\n%s"
                          % (pod.name, pod.proc.returncode, read(pod.log_path)[-3000:]))
            return False
        ok, detail = run_probe(ctx, pod, "startupProbe", probe)
        if ok:
            log("ok: %s started (%.1f s): %s" % (pod.name, time.monotonic() - pod.t0, detail))
            return True
        time.sleep(0.2)
    ctx.fails.add("%s: probe did not succeed in %d s: %s" % (pod.name, limit, detail))
    return False


def check_ports(ctx, pod):
    """Every containerPort listens; every Service port that selects the pod
    answers (gRPC health for appProtocol grpc, /metrics for http); the
    Prometheus annotation's port serves /metrics."""
    for cp, local in sorted(pod.ports.items()):
        try:
            socket.create_connection(("127.0.0.1", local), timeout=2).close()
        except OSError as e:
            ctx.fails.add("%s: containerPort %d (127.0.0.1:%d): nothing listens: %s"
                          % (pod.name, cp, local, e))
    for svc in ctx.services:
        sel = svc["spec"].get("selector", {})
        if not sel or not all(pod.labels.get(k) == v for k, v in sel.items()):
            continue
        for sp in svc["spec"].get("ports", []):
            name = "Service %s port %s" % (svc["metadata"]["name"], sp["port"])
            try:
                local = pod.local_port(sp.get("targetPort", sp["port"]))
            except Fail as e:
                ctx.fails.add("%s: %s" % (name, e))
                continue
            proto = sp.get("appProtocol", "")
            if proto == "grpc":
                status, detail = grpc_health_check(local, "", 3)
                if status == "SERVING":
                    log("ok: %s (gRPC): health SERVING" % name)
                else:
                    ctx.fails.add("%s (gRPC, 127.0.0.1:%d): health %s %s"
                                  % (name, local, status, detail))
            elif proto in ("http", "") and sp.get("name") == "metrics":
                check_metrics(ctx, name, local)
    if pod.annotations.get("prometheus.io/scrape") == "true":
        port = pod.annotations.get("prometheus.io/port")
        path = pod.annotations.get("prometheus.io/path", "/metrics")
        try:
            check_metrics(ctx, "annotation prometheus.io/port=%s" % port,
                          pod.local_port(port), path)
        except Fail as e:
            ctx.fails.add("%s: prometheus.io/port: %s" % (pod.name, e))


def check_metrics(ctx, name, port, path="/metrics"):
    url = "http://127.0.0.1:%d%s" % (port, path)
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode(errors="replace")
        if "yirage_" in body:
            log("ok: %s: GET %s serves yirage_ metrics" % (name, path))
        else:
            ctx.fails.add("%s: GET %s: no yirage_ metrics" % (name, url))
    except (urllib.error.URLError, OSError) as e:
        ctx.fails.add("%s: GET %s: %s" % (name, url, e))


def client(ctx, server, *args, timeout=20):
    env = {"PATH": DEBIAN_PATH, "YIRAGE_TOKEN": ctx.admin_token}
    p = subprocess.run([os.path.join(ctx.bin_dir, "yirage-client"), "--server", server] +
                       list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout


def run_job(ctx, server_addr):
    rc, out = client(ctx, server_addr, "submit", GRAPH, "--budget-candidates", "2")
    if rc != 0:
        ctx.fails.add("submit %s: exit %d: %s" % (GRAPH, rc, out.strip()))
        return
    job = out.strip().splitlines()[-1].strip()
    log("submitted %s (%s)" % (job, os.path.relpath(GRAPH, SOURCE_DIR)))
    t0 = time.monotonic()
    deadline = min(time.monotonic() + JOB_TIMEOUT_S, START + TOTAL_LIMIT_S)
    state, last = "", ""
    while time.monotonic() < deadline:
        rc, out = client(ctx, server_addr, "get", job, "--json")
        try:
            info = json.loads(out) if rc == 0 else {}
        except ValueError:
            info = {}
        state = info.get("state", "")
        last = out
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        for pod in ctx.pods:
            if not pod.alive():
                ctx.fails.add("%s exited (%s) while the job ran:\n%s"
                              % (pod.name, pod.proc.returncode, read(pod.log_path)[-3000:]))
                return
        time.sleep(0.5)
    if state == "SUCCEEDED":
        log("ok: job %s SUCCEEDED" % job)
    else:
        ctx.fails.add("job %s: %s after %.0f s: %s" % (job, state or "not ended",
                                                        time.monotonic() - t0,
                                                        last.strip()[-1500:]))
    rc, out = client(ctx, server_addr, "workers")
    log("workers:\n" + "\n".join("    " + line for line in out.strip().splitlines()))


def shutdown(ctx, pods):
    """SIGTERM to each container's process at once, as deleting the pods does;
    each must exit 0 within its terminationGracePeriodSeconds."""
    t0 = time.monotonic()
    running = [pod for pod in pods if pod.alive()]
    for pod in pods:
        if pod not in running:
            ctx.fails.add("%s was not running at SIGTERM (exit %s)"
                          % (pod.name, pod.proc.returncode if pod.proc else "not started"))
    for pod in running:
        pod.proc.send_signal(signal.SIGTERM)
    for pod in running:
        try:
            rc = pod.proc.wait(timeout=max(0.1, t0 + pod.grace - time.monotonic()))
        except subprocess.TimeoutExpired:
            ctx.fails.add("%s did not exit within terminationGracePeriodSeconds (%d s) of "
                          "SIGTERM" % (pod.name, pod.grace))
            pod.kill()
            continue
        took = time.monotonic() - t0
        if rc == 0:
            log("ok: %s exited 0 %.1f s after SIGTERM (grace %d s)" % (pod.name, took, pod.grace))
        else:
            ctx.fails.add("%s exited %d after SIGTERM (%.1f s):\n%s"
                          % (pod.name, rc, took, read(pod.log_path)[-2000:]))


def run_kustomization(kdir, args, yaml, stages, fails):
    rel = os.path.relpath(kdir, SOURCE_DIR)
    log("==== %s" % rel)
    objs = render(kdir, yaml)
    server_wl, worker_wl = find(objs, *SERVER), find(objs, *WORKER)
    for (kind, name), wl in ((SERVER, server_wl), (WORKER, worker_wl)):
        if wl is None:
            raise Fail("%s: no %s %s in the rendered manifests" % (rel, kind, name))
    work = tempfile.mkdtemp(prefix="yirage_manifests_")
    os.chmod(work, 0o755)  # the pods' users reach their folders through it
    as_user = os.geteuid() == 0
    ctx = Context(objs, args.bin_dir, work, stages, fails, as_user)
    try:
        server = Pod(ctx, server_wl, "yirage-server-0")
        worker = Pod(ctx, worker_wl, "yirage-worker-cpu-5d8f9c7b6-x2x4q")
        ctx.targets = [server, worker]
        server.build()
        worker.build()
        for pod in (server, worker):
            log("%s: %s\n    %s" % (pod.where(), shlex.join(pod.original_argv),
                                    pod.command_line()))
        if not as_user:
            log("note: not root, so the processes run as uid %d, not as the pods' runAsUser"
                % os.geteuid())
        if fails.items:
            return
        server.t0 = time.monotonic()
        server.start()
        if not wait_started(ctx, server):
            return
        check_probes(ctx, server, ("readinessProbe", "livenessProbe"), "after start")
        check_ports(ctx, server)
        # The check must be able to fail: a service the server does not have.
        status, detail = grpc_health_check(server.local_port(server.container_port(
            (server.c.get("readinessProbe") or {}).get("grpc", {}).get("port", 50051))),
            "yirage.v1.NoSuchService", 3)
        if status == "SERVING":
            fails.add("gRPC health answers SERVING for a service that does not exist")
        else:
            log("ok: health of an unknown service: %s %s" % (status or "no status", detail))
        worker.t0 = time.monotonic()
        worker.start()
        wait_started(ctx, worker)
        time.sleep(0.5)
        if not worker.alive():
            ctx.fails.add("%s exited (%s) at start:\n%s" % (worker.name, worker.proc.returncode,
                                                             read(worker.log_path)[-3000:]))
            return
        client_svc = ctx.service("yirage-server")
        if client_svc is None:
            raise Fail("no Service yirage-server (the client API) in the rendered manifests")
        port = client_svc["spec"]["ports"][0]["port"]
        run_job(ctx, ctx.service_address("yirage-server", port, "yirage-client"))
        check_probes(ctx, server, ("startupProbe", "readinessProbe", "livenessProbe"),
                     "after the job")
        check_probes(ctx, worker, ("startupProbe", "readinessProbe", "livenessProbe"),
                     "after the job")
        shutdown(ctx, [worker, server])
    finally:
        for pod in ctx.pods:
            if pod.alive():
                pod.kill()
        if fails.items:
            for pod in ctx.pods:
                print("---- %s log (tail) ----\n%s" % (pod.name, "\n".join(
                    read(pod.log_path).splitlines()[-25:])))
        if args.keep:
            log("kept " + work)
        else:
            subprocess.run(["chmod", "-R", "u+w", work])
            shutil.rmtree(work, ignore_errors=True)


def reachable_by_others(path):
    """True when every folder up to `path` lets other users through."""
    path = os.path.abspath(path)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default=os.path.join(SOURCE_DIR, "build", "bin"))
    ap.add_argument("--kustomization", action="append",
                    help="kustomization folder (default: overlays/dev and base)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folders")
    args = ap.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    kdirs = args.kustomization or [os.path.join(K8S_DIR, "overlays", "dev"),
                                   os.path.join(K8S_DIR, "base")]

    if not shutil.which("kubectl"):
        print("SKIP: kubectl is not installed (Debian: kubernetes-client; "
              "scripts/install-deps.sh installs it)")
        return 77
    try:
        import yaml
    except ImportError:
        print("SKIP: python3-yaml is not installed for /usr/bin/python3 "
              "(scripts/install-deps.sh installs it)")
        return 77
    for b in ("yirage-server", "yirage-worker", "yirage-client"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            print("FAIL: %s/%s not built" % (args.bin_dir, b))
            return 1

    fails = Failures()
    stages = parse_dockerfile(DOCKERFILE)
    copied = None
    if os.geteuid() == 0 and not reachable_by_others(args.bin_dir):
        # The pods' users cannot reach a checkout under a private home
        # (/root is 0700): their copy of the programs, as the image has them.
        copied = tempfile.mkdtemp(prefix="yirage_manifests_bin_")
        os.chmod(copied, 0o755)
        for name in os.listdir(args.bin_dir):
            if name.startswith("yirage-") or (name.startswith("lib") and ".so" in name):
                shutil.copy2(os.path.join(args.bin_dir, name), copied)
        log("note: %s is not reachable by other users; the programs run from a copy in %s"
            % (args.bin_dir, copied))
        args.bin_dir = copied
    try:
        for kdir in kdirs:
            try:
                run_kustomization(os.path.abspath(kdir), args, yaml, stages, fails)
            except (Fail, subprocess.TimeoutExpired, OSError) as e:
                fails.add(str(e))
    finally:
        if copied:
            shutil.rmtree(copied, ignore_errors=True)
    log("done in %.1f s" % (time.monotonic() - START))
    if fails.items:
        print("\nFAILED (%d):" % len(fails.items))
        for f in fails.items:
            print("  - " + f)
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
