"""The Prometheus alerting rules (etc/prometheus/mq-alerts.yml) and the Grafana dashboard
(etc/grafana/mq.json): promtool checks the rules and runs their unit tests (tests/alerts/),
and every metric they name is served by a live daemon's GET /metrics."""

import json
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from support import poll_for
from repo_support import REPO

RULES = REPO / "etc" / "prometheus" / "mq-alerts.yml"
RULE_TESTS = REPO / "tests" / "alerts" / "mq-alerts.test.yml"
DASHBOARD = REPO / "etc" / "grafana" / "mq.json"
#: The names mq serves all begin so; anything else a query names is Prometheus's own (up).
METRIC = re.compile(r"\bmq_[a-z0-9_]+\b")
#: Grafana's variables in the dashboard's queries, and what stands for them in a check.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$instance": ".*", "$queue": ".*"}


def promtool() -> str:
    """The promtool command, or a skip saying how to get it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed: `make test` installs it (apt-get install prometheus)")
    return path


def rule_expressions() -> dict[str, str]:
    """alert name -> PromQL expression, from the rules file."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard_panels() -> list[dict]:
    """Every panel of the dashboard, those inside rows included."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return panels + [inner for panel in panels for inner in panel.get("panels", [])]


def dashboard_expressions() -> list[str]:
    """Every PromQL query of the dashboard: panels' targets and the variables' queries."""
    exprs = [target["expr"] for panel in dashboard_panels() for target in panel.get("targets", [])]
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    return exprs + [v["definition"] for v in variables if v["type"] == "query"]


def served_names(daemon) -> set[str]:
    """The sample names of one GET /metrics."""
    resp = daemon.request("GET", "/metrics")
    assert resp.status == 200
    return {s.name for family in text_string_to_metric_families(resp.body.decode())
            for s in family.samples}


def test_the_rules_pass_promtool_check():
    result = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in result.stdout


def test_each_alert_fires_when_it_should_and_only_then():
    # The cases (tests/alerts/mq-alerts.test.yml) give each alert the series that must raise
    # it, with its labels and annotations, and healthy series that must not.
    result = subprocess.run([promtool(), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert tested == set(rule_expressions())


def test_the_alerts_cover_what_operators_watch():
    exprs = rule_expressions()
    named = {name for expr in exprs.values() for name in METRIC.findall(expr)}
    assert {"mq_messages_ready", "mq_oldest_ready_age_seconds", "mq_dead_letters_total",
            "mq_process_restarts_total", "mq_http_responses_total",
            "mq_flush_seconds_bucket"} <= named
    assert any('code="503"' in expr for expr in exprs.values())
    assert any('code=~"5.."' in expr for expr in exprs.values())


def test_the_dashboard_is_a_valid_grafana_dashboard():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] == "mq"
    assert isinstance(dashboard["schemaVersion"], int)
    panels = dashboard_panels()
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        assert panel["type"] in {"row", "timeseries", "stat"}
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] != "row":
            # Every query goes to the data source the viewer picks, not one of this author's.
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]
            assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for expr in dashboard_expressions():
        used = set(re.findall(r"\$\w+", expr))
        assert used <= set(GRAFANA_VARIABLES), expr


def test_the_dashboard_queries_are_valid_promql(tmp_path):
    # promtool parses every query as a recording rule, once Grafana's variables are filled in.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"mq_dashboard:query{i}", "expr": substituted(expr)}
        for i, expr in enumerate(dashboard_expressions()) if not expr.startswith("label_values(")]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def substituted(expr: str) -> str:
    """A dashboard query with its Grafana variables replaced by plain values."""
    for variable, value in sorted(GRAFANA_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    return expr


@pytest.mark.slow
def test_every_metric_the_rules_and_the_dashboard_name_is_served(mq):
    # A queue with a message ready (its oldest age exists only then), one that was
    # dead-lettered, and a first response counted (the counter appears with it).
    assert mq.request("PATCH", "/alerted/properties", b'{"retry": 0}').status == 200
    assert mq.request("POST", "/alerted/messages", b"dies").status == 201
    assert mq.request("GET", "/alerted/messages").status == 200
    poll_for(lambda: mq.request("GET", "/_mq/stats").json()["queues"].get("alerted.dead", {})
             .get("ready") == 1, 10, what="the message to be dead-lettered (1 s timeout)")
    assert mq.request("POST", "/alerted/messages", b"waits").status == 201
    wanted = ({name for expr in rule_expressions().values() for name in METRIC.findall(expr)}
              | {name for expr in dashboard_expressions() for name in METRIC.findall(expr)})
    poll_for(lambda: wanted <= served_names(mq), 10,
             what=f"every named metric to be served: missing {wanted - served_names(mq)}")
