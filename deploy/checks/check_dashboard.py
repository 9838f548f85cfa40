#!/usr/bin/env python3
"""Offline checks of the Grafana dashboard (deploy/grafana/ferry.json).

- the file is valid JSON with a title, a uid, panels and a schemaVersion;
- every panel but a row has a Prometheus datasource and at least one target, every
  target a refId, a datasource and a non-empty expr, panel ids are unique and panels fit
  the 24-column grid without overlapping;
- every metric name an expr (or a template variable's query) uses is listed in
  metrics-used.txt, every other identifier is a PromQL function, aggregation or keyword,
  and every listed name is used somewhere;
- with --scrape URL (repeatable): every listed name is exported by at least one of the
  scraped /metrics pages (a live check, for a cluster you can reach).

Standard library only. Exits 1 on any failure, printing each.
"""

import argparse
import json
import re
import sys
import urllib.request

# PromQL: functions, aggregations, keywords and literals (Prometheus 2.x/3.x).
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
    "delta", "deriv", "double_exponential_smoothing", "exp", "floor", "histogram_avg",
    "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
    "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
    "info", "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
    "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc",
    "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan",
    "tanh", "time", "timestamp", "vector", "year",
}
AGGREGATIONS = {
    "avg", "bottomk", "count", "count_values", "group", "limitk", "limit_ratio", "max", "min",
    "quantile", "stddev", "stdvar", "sum", "topk",
}
# Grafana's Prometheus template functions (variable queries only).
GRAFANA_FUNCTIONS = {"label_names", "label_values", "metrics", "query_result"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end"}
LABEL_LIST_KEYWORDS = ("by", "without", "on", "ignoring", "group_left", "group_right")

IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
NUMBER = re.compile(r"(?<![A-Za-z0-9_:.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def strip_expr(expr):
    """The expression without strings, label matchers, ranges, label lists, Grafana
    variables and numbers: what is left are metric names, functions and keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', " ", expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    text = re.sub(r"\$\{?\w+(?::\w+)?\}?", " ", text)
    lists = "|".join(LABEL_LIST_KEYWORDS)
    text = re.sub(r"\b(" + lists + r")\s*\([^()]*\)", " ", text)
    text = NUMBER.sub(" ", text)
    return text


def names_in(expr, functions):
    """(metric names, problems) of one expression."""
    problems = []
    if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
        problems.append("unbalanced brackets")
    metrics = set()
    text = strip_expr(expr)
    for match in IDENT.finditer(text):
        word = match.group(0)
        called = text[match.end():].lstrip().startswith("(")
        if word in KEYWORDS or word in LABEL_LIST_KEYWORDS:
            continue
        if called:
            if word not in functions:
                problems.append(f"unknown function {word!r}")
        elif word in functions:
            problems.append(f"{word!r} used without arguments")
        else:
            metrics.add(word)
    return metrics, problems


def overlap(a, b):
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dashboard")
    parser.add_argument("metrics_used")
    parser.add_argument("--scrape", action="append", default=[], metavar="URL",
                        help="a /metrics URL whose exported names are checked too")
    args = parser.parse_args()
    failures = []

    try:
        with open(args.dashboard, encoding="utf-8") as f:
            board = json.load(f)
    except (OSError, ValueError) as err:
        print(f"FAIL {args.dashboard}: {err}")
        return 1
    with open(args.metrics_used, encoding="utf-8") as f:
        listed = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    listed_set = set(listed)
    if len(listed) != len(listed_set):
        failures.append("metrics-used.txt names a metric twice")
    for name in listed:
        if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name):
            failures.append(f"metrics-used.txt: {name!r} is not a metric name")

    for key in ("title", "uid", "panels", "schemaVersion", "templating"):
        if key not in board:
            failures.append(f"dashboard has no {key!r}")

    used = set()
    exprs = 0
    ids = set()
    boxes = []
    panels = []
    for panel in board.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # collapsed rows hold their panels
    for panel in panels:
        title = panel.get("title", "?")
        pid = panel.get("id")
        if pid in ids:
            failures.append(f"panel {title!r}: id {pid} used twice")
        ids.add(pid)
        grid = panel.get("gridPos")
        if not grid or any(k not in grid for k in ("x", "y", "w", "h")):
            failures.append(f"panel {title!r}: no gridPos")
        elif grid["x"] < 0 or grid["x"] + grid["w"] > 24:
            failures.append(f"panel {title!r}: outside the 24-column grid")
        else:
            for other_title, other in boxes:
                if overlap(grid, other):
                    failures.append(f"panel {title!r} overlaps {other_title!r}")
            boxes.append((title, grid))
        if panel.get("type") == "row":
            continue
        ds = panel.get("datasource")
        if not isinstance(ds, dict) or ds.get("type") != "prometheus" or not ds.get("uid"):
            failures.append(f"panel {title!r}: no Prometheus datasource")
        targets = panel.get("targets") or []
        if not targets:
            failures.append(f"panel {title!r}: no targets")
        for t in targets:
            where = f"panel {title!r} target {t.get('refId', '?')}"
            if not t.get("refId"):
                failures.append(f"{where}: no refId")
            if not isinstance(t.get("datasource"), dict):
                failures.append(f"{where}: no datasource")
            expr = t.get("expr", "")
            if not expr.strip():
                failures.append(f"{where}: empty expr")
                continue
            exprs += 1
            metrics, problems = names_in(expr, FUNCTIONS | AGGREGATIONS)
            failures.extend(f"{where}: {p}: {expr}" for p in problems)
            for name in sorted(metrics - listed_set):
                failures.append(f"{where}: {name!r} is not in metrics-used.txt")
            used |= metrics

    variables = board.get("templating", {}).get("list", [])
    for var in variables:
        if var.get("type") != "query":
            continue
        query = var.get("query")
        query = query.get("query", "") if isinstance(query, dict) else (query or "")
        metrics, problems = names_in(query, FUNCTIONS | AGGREGATIONS | GRAFANA_FUNCTIONS)
        # label_values(metric, label): the second argument is a label, not a metric.
        m = re.match(r"\s*label_values\(\s*(?:[^,()]*?\s*,\s*)?(\w+)\s*\)\s*$", query)
        if m:
            metrics.discard(m.group(1))
        failures.extend(f"variable {var.get('name')}: {p}" for p in problems)
        for name in sorted(metrics - listed_set):
            failures.append(f"variable {var.get('name')}: {name!r} is not in metrics-used.txt")
        used |= metrics
    for name in sorted(listed_set - used):
        failures.append(f"metrics-used.txt: {name!r} is used by no panel or variable")

    if args.scrape:
        exported = set()
        for url in args.scrape:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read().decode("utf-8", "replace")
            except OSError as err:
                failures.append(f"scrape {url}: {err}")
                continue
            for line in body.splitlines():
                if line and not line.startswith("#"):
                    exported.add(re.split(r"[{\s]", line, maxsplit=1)[0])
        for name in sorted(listed_set - exported):
            failures.append(f"{name!r} is exported by none of the scraped processes")

    print(f"dashboard {board.get('title')!r} (uid {board.get('uid')}, schemaVersion "
          f"{board.get('schemaVersion')}): {len(panels)} panels, {exprs} queries, "
          f"{len(variables)} variables, {len(used)} metric names"
          + (f", checked against {len(args.scrape)} scrapes" if args.scrape else ""))
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
