#!/usr/bin/env python3
"""Checks the PromQL of the Grafana dashboard and of the alerting rules.

1. Every metric an expression names is one the server exports: the names are
   compared against the exposition of server/metrics' PrometheusServerMetrics
   after every event ran once (printed by specverify_metrics_exposition_dump),
   plus Prometheus's own `up`.
2. Every expression parses with Prometheus's own parser: they are written,
   Grafana variables substituted, as recording rules of a generated rules
   file that `promtool check rules` must accept.
3. The dashboard is well formed (panels have queries, titles are unique) and
   covers what operators watch (latency quantiles, throughput, acceptance
   rate, batch size, path mix, arena use, rejections).

Usage: check_promql.py --dump <exposition dump binary> --promtool <path>
                       --dashboard <json> --alerts <alerts.yml>
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on",
                   "ignoring", "group_left", "group_right", "inf", "nan", "atan2"}

# Grafana's variables, as a query would see them for one concrete choice.
GRAFANA_SUBSTITUTIONS = [
    ("$__rate_interval", "1m"), ("$__interval", "15s"), ("$__range", "1h"),
    ("${job}", "specverify"), ("$job", "specverify"),
    ("${instance}", ".*"), ("$instance", ".*"),
]

# What the dashboard must show (issue #6), as metric names it must query.
REQUIRED_DASHBOARD_METRICS = {
    "specverify_request_duration_seconds_bucket": "latency quantiles",
    "specverify_requests_total": "throughput",
    "specverify_accepted_tokens_total": "acceptance rate",
    "specverify_draft_tokens_total": "acceptance rate",
    "specverify_batch_size_sequences_bucket": "batch size",
    "specverify_batches_total": "path mix",
    "specverify_kv_arena_used_bytes": "arena use",
    "specverify_kv_arena_capacity_bytes": "arena use",
    "specverify_requests_rejected_total": "rejections",
}


def substitute_grafana_variables(expr):
    for variable, value in GRAFANA_SUBSTITUTIONS:
        expr = expr.replace(variable, value)
    return expr


def metric_names(expr):
    """The metric names an expression selects (not functions, labels or keywords)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # string literals
    s = re.sub(r"\{[^}]*\}", " ", s)                        # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)                       # range selectors
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = []
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s):
        token = match.group(0)
        before = s[match.start() - 1] if match.start() > 0 else " "
        if before.isdigit() or before == ".":
            continue  # the exponent of a number such as 1e-3
        if s[match.end():].lstrip().startswith("("):
            continue  # a function or an aggregation
        if token.lower() in PROMQL_KEYWORDS:
            continue
        names.append(token)
    return names


def self_test():
    """The extractor itself, on shapes the dashboard uses."""
    cases = {
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{job=~"x",rpc="Verify"}[5m])))':
            ["a_bucket"],
        'sum(rate(b_total[1m])) / sum(rate(c_total[1m])) > 1e-3': ["b_total", "c_total"],
        'up{job="specverify"} == 0': ["up"],
        'max by (instance, version) (info{x="sum(y)"})': ["info"],
        'a and on (instance) b unless c offset 5m': ["a", "b", "c"],
    }
    for expr, expected in cases.items():
        got = metric_names(expr)
        if got != expected:
            raise AssertionError(f"metric_names({expr!r}) = {got}, expected {expected}")


def exported_names(dump_binary):
    text = subprocess.run([dump_binary], check=True, capture_output=True, text=True).stdout
    names = {"up"}  # added by Prometheus to every target
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    if len(names) < 20:
        raise AssertionError(f"the exposition dump lists only {sorted(names)}")
    return names


def dashboard_queries(dashboard):
    """(where, expr) for every panel target, and every templating query."""
    queries = []
    problems = []
    titles = set()

    def walk(panels):
        for panel in panels:
            if panel.get("type") == "row":
                walk(panel.get("panels", []))
                continue
            title = panel.get("title", "")
            if not title:
                problems.append(f"panel id {panel.get('id')} has no title")
            if title in titles:
                problems.append(f"two panels are titled {title!r}")
            titles.add(title)
            targets = [t for t in panel.get("targets", []) if t.get("expr", "").strip()]
            if not targets:
                problems.append(f"panel {title!r} has no query")
            for target in targets:
                queries.append((f"panel {title!r} target {target.get('refId')}", target["expr"]))

    walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        if variable.get("type") != "query" or not query:
            continue
        # label_values(<series selector>, <label>): the selector is PromQL.
        match = re.fullmatch(r"\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*", query)
        if not match:
            problems.append(f"variable {variable.get('name')!r}: unsupported query {query!r}")
            continue
        queries.append((f"variable {variable.get('name')!r}", match.group(1)))
    return queries, problems


def alert_queries(alerts_path):
    queries = []
    problems = []
    alert = None
    with open(alerts_path) as f:
        for number, line in enumerate(f, 1):
            named = re.match(r"\s*-\s*alert:\s*(\S+)", line)
            if named:
                alert = named.group(1)
            expr = re.match(r"\s*expr:\s*(.*)$", line)
            if expr:
                value = expr.group(1).strip()
                if value in ("|", ">", "|-", ">-", ""):
                    problems.append(f"{alerts_path}:{number}: expr must stay on one line")
                    continue
                queries.append((f"alert {alert}", value))
    return queries, problems


def check_with_promtool(promtool, queries):
    """Prometheus's parser: every expression as a recording rule."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "queries.rules.yml")
        with open(path, "w") as f:
            f.write("groups:\n  - name: parsed_queries\n    rules:\n")
            for i, (_, expr) in enumerate(queries):
                f.write(f"      - record: specverify:parsed_query_{i}\n")
                f.write(f"        expr: {json.dumps(expr)}\n")
        result = subprocess.run([promtool, "check", "rules", path], capture_output=True,
                                text=True)
        if result.returncode != 0:
            listing = "\n".join(f"  {i}: {where}: {expr}" for i, (where, expr) in
                                enumerate(queries))
            return [f"promtool check rules rejected the queries:\n{result.stdout}"
                    f"{result.stderr}\nqueries:\n{listing}"]
    return []


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump", required=True)
    parser.add_argument("--promtool", required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--alerts", required=True)
    args = parser.parse_args()

    self_test()
    exported = exported_names(args.dump)
    with open(args.dashboard) as f:
        dashboard = json.load(f)

    board, problems = dashboard_queries(dashboard)
    alerts, alert_problems = alert_queries(args.alerts)
    problems += alert_problems
    queries = [(where, substitute_grafana_variables(expr)) for where, expr in board + alerts]

    board_names = set()
    for where, expr in queries:
        if "$" in expr:
            problems.append(f"{where}: unsubstituted variable in {expr!r}")
        names = metric_names(expr)
        if not names:
            problems.append(f"{where}: selects no metric: {expr!r}")
        for name in names:
            if name not in exported:
                problems.append(f"{where}: {name} is not exported by the server")
        if not where.startswith("alert"):
            board_names.update(names)
    for name, topic in sorted(REQUIRED_DASHBOARD_METRICS.items()):
        if name not in board_names:
            problems.append(f"dashboard shows no {topic}: no query on {name}")
    problems += check_with_promtool(args.promtool, queries)

    if problems:
        print("\n".join(problems))
        return 1
    print(f"OK: {len(board)} dashboard and {len(alerts)} alert queries; "
          f"{len(board_names)} metric names, all exported; all parsed by promtool")
    return 0


if __name__ == "__main__":
    sys.exit(main())
