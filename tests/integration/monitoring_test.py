#!/usr/bin/python3
"""Monitoring test (issue 20): the Prometheus config, the alerting rules and
the Grafana dashboards of deploy/ against a real yirage-server.

  /usr/bin/python3 tests/integration/monitoring_test.py [--bin-dir build/bin]

1. promtool check config / check rules / test rules on deploy/prometheus.
2. Starts build/bin/yirage-server on free loopback ports (port 0; it prints
   the ports it bound) with a temp database and one local CPU worker, and
   Debian's `prometheus` (its own config and data folder in a temp folder,
   scraping the server's metrics port every second and evaluating
   deploy/prometheus/alerts.yml).
3. Submits two small jobs with build/bin/yirage-client and waits for them to
   end, plus one submission the server rejects (unknown chip) and one lookup
   of a job that does not exist (so rejections and non-OK RPC codes have
   samples).
4. Once Prometheus has scraped the end state, evaluates every panel query of
   every dashboard in deploy/grafana/dashboards through /api/v1/query
   ($__rate_interval = 15s) and fails on a query that is invalid or returns
   no series, naming the panel and the reason. Panels in MAY_BE_EMPTY show
   events a short healthy run does not have: their queries must be valid and
   every metric they read must exist (have at least one series), but may
   return nothing. Also checks that every alerting rule evaluates without
   error against the live data.

Only the standard library (call it with /usr/bin/python3). Exit 0 = pass,
1 = fail, 77 = skipped (prometheus or promtool not installed).
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROM_DIR = os.path.join(SOURCE_DIR, "deploy", "prometheus")
DASHBOARD_GLOB = os.path.join(SOURCE_DIR, "deploy", "grafana", "dashboards", "*.json")
RATE_INTERVAL = "15s"
SCRAPE_INTERVAL_S = 1

# Panels that may legitimately return no series in a short, healthy run: the
# query must still be valid and each metric it reads must exist.
MAY_BE_EMPTY = {
    "Lease expiries and redeliveries": "no lease expires in a short healthy run",
}

# Grafana's built-in variables a panel query may use, with the values used here.
BUILTIN_VARS = {
    "__rate_interval": RATE_INTERVAL,
    "__interval": "1s",
    "__interval_ms": "1000",
    "__range": "1m",
    "__range_s": "60",
    "__range_ms": "60000",
}

START = time.monotonic()


def log(msg):
    print("[%6.1fs] %s" % (time.monotonic() - START, msg), flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv, timeout=60, cwd=None):
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout


class Failures:
    def __init__(self):
        self.items = []

    def add(self, msg):
        self.items.append(msg)
        log("FAIL: " + msg)


def check_promtool(promtool, fails):
    """promtool check config / check rules / test rules."""
    checks = [
        ([promtool, "check", "config", "prometheus.yml"], None),
        # Debian's prometheus is built without the Kubernetes service
        # discovery: its promtool cannot parse kubernetes_sd_configs.
        ([promtool, "check", "config", "prometheus-kubernetes.yml"],
         "field kubernetes_sd_configs not found"),
        ([promtool, "check", "rules", "alerts.yml"], None),
        ([promtool, "test", "rules", "alerts_test.yml"], None),
    ]
    for argv, unsupported in checks:
        rc, out = run(argv, cwd=PROM_DIR)
        name = " ".join(argv[1:])
        if rc == 0:
            log("ok: promtool " + name)
        elif unsupported and unsupported in out:
            log("not checked: promtool %s (this promtool lacks it: %s)" % (name, unsupported))
        else:
            fails.add("promtool %s failed:\n%s" % (name, out.rstrip()))


class Processes:
    """The processes this test starts (each in its own process group)."""

    def __init__(self):
        self.procs = []

    def start(self, argv, log_path):
        out = open(log_path, "w")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        out.close()
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group: the server's local workers too
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def start_server(procs, bin_dir, work):
    log_path = os.path.join(work, "server.log")
    argv = [os.path.join(bin_dir, "yirage-server"),
            "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0", "--db", os.path.join(work, "yirage.db"),
            "--local-workers", "cpu",
            # One worker: no second worker to confirm a winner on.
            "--confirm-winners", "false",
            "--search-seconds", "5"]
    p = procs.start(argv, log_path)
    pat = re.compile(r"listening client=(\S+) worker=(\S+) metrics=(\S+)")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = pat.search(read(log_path))
        if m:
            return m.group(1), m.group(3), log_path
        if p.poll() is not None:
            raise RuntimeError("yirage-server exited early:\n" + read(log_path))
        time.sleep(0.05)
    raise RuntimeError("yirage-server printed no listening line:\n" + read(log_path))


def start_prometheus(procs, prometheus, work, metrics_addr):
    port = free_port()
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write("""global:
  scrape_interval: {i}s
  scrape_timeout: {i}s
  evaluation_interval: {i}s
rule_files:
  - {rules}
scrape_configs:
  - job_name: yirage-server
    metrics_path: /metrics
    static_configs:
      - targets: ["{target}"]
""".format(i=SCRAPE_INTERVAL_S, rules=json.dumps(os.path.join(PROM_DIR, "alerts.yml")),
           target=metrics_addr))
    log_path = os.path.join(work, "prometheus.log")
    argv = [prometheus, "--config.file=" + config,
            "--storage.tsdb.path=" + os.path.join(work, "prometheus-data"),
            "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"]
    p = procs.start(argv, log_path)
    base = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError("prometheus exited early:\n" + read(log_path))
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                if r.status == 200:
                    return base, log_path
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError("prometheus not ready in 30 s:\n" + read(log_path))


def prom_query(base, expr):
    """(ok, result list or error text) of an instant query."""
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(base + "/api/v1/query", data=data, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        try:
            body = json.load(e)
        except ValueError:
            return False, "HTTP %d" % e.code
    except (urllib.error.URLError, OSError, ValueError) as e:
        return False, str(e)
    if body.get("status") != "success":
        return False, "%s: %s" % (body.get("errorType"), body.get("error"))
    result = body["data"]["result"]
    if body["data"]["resultType"] == "scalar":
        result = [{"metric": {}, "value": result}]
    return True, result


def client(bin_dir, server, *args, timeout=15):
    return run([os.path.join(bin_dir, "yirage-client"), "--server", server] + list(args),
               timeout=timeout)


def run_jobs(bin_dir, server, fails):
    graphs = [os.path.join(SOURCE_DIR, "examples", "graphs", "softmax.json"),
              os.path.join(SOURCE_DIR, "examples", "graphs", "cpu",
                           "cpu_gelu_fp32_1024x4096.json")]
    jobs = []
    for g in graphs:
        rc, out = client(bin_dir, server, "submit", g, "--budget-candidates", "2")
        if rc != 0:
            fails.add("submit %s: exit %d: %s" % (g, rc, out.strip()))
            continue
        jobs.append(out.strip().splitlines()[-1].strip())
    log("submitted %s" % ", ".join(jobs))
    # A submission the server rejects (a chip not in its registry; the
    # client checks graphs itself, so the graph is a good one) and a lookup
    # of a job that does not exist: rejections and non-OK RPC codes.
    rc, out = client(bin_dir, server, "submit", graphs[0], "--chip", "no_such_chip")
    if rc == 0:
        fails.add("a submission for an unknown chip was accepted: %s" % out.strip())
    rc, out = client(bin_dir, server, "get", "job-doesnotexist")
    if rc == 0:
        fails.add("get of a missing job succeeded: %s" % out.strip())

    deadline = time.monotonic() + 60
    pending = list(jobs)
    while pending and time.monotonic() < deadline:
        for j in list(pending):
            rc, out = client(bin_dir, server, "get", j, "--json")
            try:
                state = json.loads(out).get("state", "") if rc == 0 else ""
            except ValueError:
                state = ""
            if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
                log("%s ended %s" % (j, state))
                pending.remove(j)
        time.sleep(0.25)
    for j in pending:
        fails.add("job %s did not end in 60 s" % j)


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def substitute(expr):
    def repl(m):
        name = m.group(1) or m.group(2)
        if name in BUILTIN_VARS:
            return BUILTIN_VARS[name]
        if name == "datasource":
            return ""
        raise KeyError(name)
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, expr)


def check_dashboard_static(path, dash, fails):
    name = os.path.relpath(path, SOURCE_DIR)
    if not dash.get("uid") or not dash.get("title"):
        fails.add("%s: uid and title must be set" % name)
    if int(dash.get("schemaVersion", 0)) < 36:
        fails.add("%s: schemaVersion %s < 36" % (name, dash.get("schemaVersion")))
    variables = dash.get("templating", {}).get("list", [])
    if not any(v.get("type") == "datasource" and v.get("query") == "prometheus"
               and v.get("name") == "datasource" for v in variables):
        fails.add("%s: no `datasource` variable of type datasource (prometheus)" % name)
    for p in walk_panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            for m in re.finditer(r"\b(rate|irate|increase)\(([^\[\]]*)\[([^\]]*)\]", expr):
                if m.group(3) != "$__rate_interval":
                    fails.add("%s: panel %r: %s(...[%s]) should use $__rate_interval"
                              % (name, p.get("title"), m.group(1), m.group(3)))
            ds = t.get("datasource") or p.get("datasource") or {}
            if isinstance(ds, dict) and ds.get("uid") not in ("${datasource}", "$datasource"):
                fails.add("%s: panel %r target %s: datasource is not ${datasource}"
                          % (name, p.get("title"), t.get("refId")))


def metric_names(expr):
    names = set(re.findall(r"\b(yirage_[A-Za-z0-9_]+)", expr))
    return sorted(names)


def check_dashboards(base, fails):
    paths = sorted(glob.glob(DASHBOARD_GLOB))
    if not paths:
        fails.add("no dashboards in " + DASHBOARD_GLOB)
    n_queries = 0
    empty = []
    for path in paths:
        with open(path) as f:
            dash = json.load(f)
        check_dashboard_static(path, dash, fails)
        dname = os.path.basename(path)
        for p in walk_panels(dash.get("panels", [])):
            title = p.get("title", "?")
            for t in p.get("targets", []):
                expr = t.get("expr")
                if not expr:
                    continue
                n_queries += 1
                where = "%s: panel %r %s" % (dname, title, t.get("refId", "?"))
                try:
                    q = substitute(expr)
                except KeyError as e:
                    fails.add("%s: unknown variable $%s in %s" % (where, e.args[0], expr))
                    continue
                ok, res = prom_query(base, q)
                if not ok:
                    fails.add("%s: invalid query: %s\n    %s" % (where, res, q))
                    continue
                if res:
                    vals = [r["value"][1] for r in res]
                    nan = sum(1 for v in vals if v in ("NaN", "+Inf", "-Inf"))
                    log("ok: %s: %d series%s" % (where, len(res),
                                                 " (%d NaN: no observations in the window)" % nan
                                                 if nan else ""))
                    continue
                missing = [m for m in metric_names(q) if not prom_query(base, "count(%s)" % m)[1]]
                if title in MAY_BE_EMPTY:
                    if missing:
                        fails.add("%s: no series, and metric(s) %s do not exist (panel may be "
                                  "empty: %s, but its metrics must exist)\n    %s"
                                  % (where, ", ".join(missing), MAY_BE_EMPTY[title], q))
                    else:
                        log("ok (may be empty: %s): %s: no series; metrics %s exist"
                            % (MAY_BE_EMPTY[title], where, ", ".join(metric_names(q))))
                    continue
                why = ("metric(s) not exported: " + ", ".join(missing) if missing
                       else "its metrics exist but the query selects nothing")
                empty.append(where)
                fails.add("%s: no series (%s)\n    %s" % (where, why, q))
    log("%d panel queries evaluated in %d dashboard(s), %d returned no series"
        % (n_queries, len(paths), len(empty)))


def check_rules_health(base, fails):
    try:
        with urllib.request.urlopen(base + "/api/v1/rules", timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
    except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
        fails.add("GET /api/v1/rules: %s" % e)
        return
    n = 0
    for g in groups:
        for rule in g.get("rules", []):
            n += 1
            if rule.get("health") != "ok":
                fails.add("rule %s: health %s: %s" % (rule.get("name"), rule.get("health"),
                                                      rule.get("lastError")))
    if n == 0:
        fails.add("prometheus loaded no alerting rules")
    else:
        log("ok: %d alerting rules evaluated against the live data without error" % n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default=os.path.join(SOURCE_DIR, "build", "bin"))
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args()

    promtool = shutil.which("promtool")
    prometheus = shutil.which("prometheus")
    if not promtool or not prometheus:
        print("SKIP: %s not installed (apt-get install prometheus)"
              % " and ".join(n for n, p in (("promtool", promtool), ("prometheus", prometheus))
                             if not p))
        return 77
    fails = Failures()
    check_promtool(promtool, fails)

    for b in ("yirage-server", "yirage-client", "yirage-worker"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            print("FAIL: %s/%s not built" % (args.bin_dir, b))
            return 1

    work = tempfile.mkdtemp(prefix="yirage_monitoring_")
    procs = Processes()
    server_log = prom_log = None
    try:
        server, metrics, server_log = start_server(procs, args.bin_dir, work)
        log("yirage-server: client %s, metrics %s" % (server, metrics))
        base, prom_log = start_prometheus(procs, prometheus, work, metrics)
        log("prometheus: %s" % base)
        run_jobs(args.bin_dir, server, fails)
        # The job gauges refresh every maintenance pass (0.5 s): wait until
        # Prometheus has scraped since the jobs ended, and at least 3 times
        # in all (rate() needs two samples; on a loaded machine the first
        # scrape can come after the jobs end).
        ended = time.time()
        deadline = time.monotonic() + 20
        while True:
            ok, res = prom_query(base, 'timestamp(up{job="yirage-server"} == 1)')
            ok_n, n = prom_query(base, 'count_over_time(up{job="yirage-server"}[1m])')
            if (ok and res and float(res[0]["value"][1]) >= ended + 2.5 * SCRAPE_INTERVAL_S
                    and ok_n and n and float(n[0]["value"][1]) >= 3):
                break
            if time.monotonic() > deadline:
                fails.add("prometheus did not scrape the server (up: %s)" % (res,))
                break
            time.sleep(0.25)
        ok, res = prom_query(base, 'count_over_time(up{job="yirage-server"}[1m])')
        log("prometheus scraped the server %s times" % (res[0]["value"][1] if ok and res else "?"))
        check_dashboards(base, fails)
        check_rules_health(base, fails)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        fails.add(str(e))
    finally:
        procs.stop_all()
        if fails.items and server_log:
            print("---- server log (tail) ----\n" + "\n".join(read(server_log).splitlines()[-30:]))
        if fails.items and prom_log:
            print("---- prometheus log (tail) ----\n" + "\n".join(read(prom_log).splitlines()[-15:]))
        if args.keep:
            log("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)

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
