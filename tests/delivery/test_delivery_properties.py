"""Queue properties and default rules, auto-create, content type."""

import json

import pytest

from delivery_support import (add, added, assert_json_error, fetch, fetch_when_ready, fetched,
                              fresh_queue, restart, set_props, shared_mq, start_killed)  # noqa: F401
from mq.properties import SYSTEM
from support import ready_daemon

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("delivery_properties")

PROPS = ("timeout", "retry", "delay", "dedup_window", "max_body_bytes", "dead_letter_queue", "accum",
         "fifo", "tags", "attributes", "retention")


@pytest.fixture(scope="module")
def rules_mq(tmp_path_factory):
    """The daemon of the tests that set the default rules (each PUTs its own) or kill it: two
    worker pairs and a 30 s redelivery timer, apart from shared_mq, whose tests expect none."""
    yield from ready_daemon(tmp_path_factory.mktemp("rules"), workers=2, timeout=30)


def props(mq, queue: str) -> dict:
    """GET /{queue}/properties: {"queue", "properties" (effective), "own"}."""
    resp = mq.request("GET", f"/{queue}/properties")
    assert resp.status == 200, resp.body
    return resp.json()


def send(mq, method: str, path: str, value) -> object:
    """A JSON request; the raw response."""
    return mq.request(method, path, value if isinstance(value, bytes) else json.dumps(value).encode())


def test_get_gives_every_property_from_the_system_defaults(shared_mq):
    queue = fresh_queue("props")
    value = props(shared_mq, queue)
    assert value["own"] == {}
    assert set(value["properties"]) == set(PROPS)
    assert value["properties"] == {**SYSTEM, "timeout": 1.0, "dead_letter_queue": f"{queue}.dead"}


def test_put_replaces_patch_merges_delete_resets(shared_mq):
    queue = fresh_queue("props")
    put = set_props(shared_mq, queue, {"retry": 5, "timeout": 7}, method="PUT")
    assert put["own"] == {"retry": 5, "timeout": 7.0}
    assert (put["properties"]["retry"], put["properties"]["timeout"]) == (5, 7.0)
    patched = set_props(shared_mq, queue, {"delay": 2, "dead_letter_queue": "elsewhere"})
    assert patched["own"] == {"retry": 5, "timeout": 7.0, "delay": 2.0, "dead_letter_queue": "elsewhere"}
    replaced = set_props(shared_mq, queue, {"accum": 0.5}, method="PUT")
    assert replaced["own"] == {"accum": 0.5}
    assert replaced["properties"]["retry"] == SYSTEM["retry"]
    assert props(shared_mq, queue)["own"] == {"accum": 0.5}
    resp = shared_mq.request("DELETE", f"/{queue}/properties")
    assert resp.status == 200 and resp.json()["own"] == {}
    assert props(shared_mq, queue)["properties"]["accum"] == SYSTEM["accum"]


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
@pytest.mark.parametrize("value, key", [
    ({"retries": 3}, "retries"),
    ({"timeout": "30"}, "timeout"),
    ({"timeout": True}, "timeout"),
    ({"timeout": 0}, "timeout"),
    ({"retry": 1.5}, "retry"),
    ({"retry": -2}, "retry"),
    ({"delay": None}, "delay"),
    ({"max_body_bytes": "1k"}, "max_body_bytes"),
    ({"dead_letter_queue": "a/b"}, "dead_letter_queue"),
    ({"dead_letter_queue": 7}, "dead_letter_queue"),
    ({"dedup_window": [1]}, "dedup_window"),
    ({"accum": -0.1}, "accum"),
    ({"fifo": 1}, "fifo"),
    ({"tags": {"team": 7}}, "tags"),
    ({"attributes": ["x"]}, "attributes"),
])
def test_unknown_key_or_wrong_type_is_400_naming_the_key_and_changes_nothing(shared_mq, method,
                                                                            value, key):
    queue = fresh_queue("bad")
    set_props(shared_mq, queue, {"retry": 4})
    assert_json_error(send(shared_mq, method, f"/{queue}/properties", value), 400, "invalid",
                      repr(key))
    assert props(shared_mq, queue)["own"] == {"retry": 4}


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"retry"', b"null"])
def test_a_body_that_is_not_a_json_object_is_400(shared_mq, method, body):
    assert_json_error(send(shared_mq, method, f"/{fresh_queue('bad')}/properties", body), 400,
                      "invalid")


def test_properties_change_behaviour_body_limit(shared_mq):
    queue = fresh_queue("limit")
    set_props(shared_mq, queue, {"max_body_bytes": 10})
    assert add(shared_mq, queue, b"0123456789").status == 201
    assert_json_error(add(shared_mq, queue, b"0123456789!"), 413, "too_large", "10")


# -- content type and auto-create ------------------------------------------------------------


def test_content_type_is_served_back_and_defaults_to_octet_stream(shared_mq):
    queue = fresh_queue("ctype")
    added(shared_mq, queue, b'{"a": 1}', headers={"Content-Type": "application/json; charset=utf-8"})
    added(shared_mq, queue, b"\x00\x01")
    added(shared_mq, queue, b"<p/>", headers={"Content-Type": "text/html"}, delay="0.2")
    assert fetched(shared_mq, queue).header("Content-Type") == "application/json; charset=utf-8"
    raw = fetched(shared_mq, queue)
    assert (raw.header("Content-Type"), raw.body) == ("application/octet-stream", b"\x00\x01")
    delayed, _ = fetch_when_ready(shared_mq, queue)
    assert delayed.header("Content-Type") == "text/html"


def test_adding_to_a_missing_queue_creates_it(shared_mq):
    queue = fresh_queue("auto")
    assert shared_mq.request("GET", f"/{queue}").status == 404
    added(shared_mq, queue, b"first")
    assert shared_mq.request("GET", f"/{queue}").status == 200
    delayed_queue = fresh_queue("auto")
    added(shared_mq, delayed_queue, b"later", delay="30")
    assert shared_mq.request("GET", f"/{delayed_queue}").status == 200


def test_with_no_auto_create_adding_to_a_missing_queue_is_404(start_killed):
    mq = start_killed(workers=1, timeout=30, args=("--no-auto-create",))
    for query in ({}, {"delay": "5"}, {"dedup_id": "k"}):
        assert_json_error(add(mq, "absent", b"x", **query), 404, "not_found", "absent")
    assert mq.request("GET", "/absent").status == 404
    assert not (mq.root / "queues" / "absent").exists()
    assert mq.request("PUT", "/absent").status == 201
    message_id = added(mq, "absent", b"now it exists", dedup_id="k")
    assert fetched(mq, "absent").header("X-Message-Id") == message_id


# -- default rules and precedence --------------------------------------------------------------


def test_precedence_is_own_then_first_matching_rule_then_system(rules_mq):
    mq = rules_mq
    rules = [["fast-.*", {"timeout": 0.5}],
             ["orders-.*", {"retry": 5, "timeout": 9, "delay": 1}],
             ["orders-eu", {"retry": 7, "dedup_window": 60}],
             [".*", {"accum": 2}]]
    resp = send(mq, "PUT", "/_mq/properties", rules)
    assert resp.status == 200, resp.body
    assert resp.json() == [["fast-.*", {"timeout": 0.5}],
                           ["orders-.*", {"retry": 5, "timeout": 9.0, "delay": 1.0}],
                           ["orders-eu", {"retry": 7, "dedup_window": 60.0}],
                           [".*", {"accum": 2.0}]]
    assert mq.request("GET", "/_mq/properties").json() == resp.json()
    set_props(mq, "orders-eu", {"timeout": 3})
    eu = props(mq, "orders-eu")["properties"]
    assert eu["timeout"] == 3.0, "own wins over the rule"
    assert eu["retry"] == 5, "the first matching rule wins, not a later one"
    assert eu["dedup_window"] == SYSTEM["dedup_window"], "a later matching rule is not merged"
    assert eu["delay"] == 1.0 and eu["accum"] == SYSTEM["accum"]
    other = props(mq, "invoices")["properties"]
    assert other["accum"] == 2.0 and other["retry"] == SYSTEM["retry"]
    assert other["timeout"] == 30.0, "the system default follows --timeout"
    # A rule is a full match of the name, not a prefix search.
    assert props(mq, "my-orders-x")["properties"]["retry"] == SYSTEM["retry"]
    # Rules drive behaviour: orders-us gets the rule's delay, fast-lane the rule's timeout.
    assert "due" in add(mq, "orders-us", b"delayed by the rule").json()
    message_id = added(mq, "fast-lane", b"x")
    assert fetched(mq, "fast-lane").header("X-Attempts") == "1"
    back, _ = fetch_when_ready(mq, "fast-lane", timeout=30)
    assert (back.header("X-Message-Id"), back.header("X-Attempts")) == (message_id, "2")
    resp = mq.request("DELETE", "/_mq/properties")
    assert resp.status == 200 and resp.json() == []
    assert props(mq, "orders-eu")["properties"]["retry"] == SYSTEM["retry"]
    assert props(mq, "orders-eu")["properties"]["timeout"] == 3.0


@pytest.mark.parametrize("rules, mentions", [
    ({"orders": {}}, "list"),
    ([["orders"]], "rule 0"),
    ([["ok", {}], ["(", {}]], "rule 1"),
    ([["x", {"retry": "2"}]], "'retry'"),
    ([["x", {"colour": "red"}]], "'colour'"),
])
def test_bad_default_rules_are_400_and_keep_the_old_rules(shared_mq, rules, mentions):
    keep = [["keep-this-rule", {"retry": 3}]]
    assert send(shared_mq, "PUT", "/_mq/properties", keep).status == 200
    try:
        assert_json_error(send(shared_mq, "PUT", "/_mq/properties", rules), 400, "invalid", mentions)
        assert shared_mq.request("GET", "/_mq/properties").json() == keep
    finally:
        assert shared_mq.request("DELETE", "/_mq/properties").json() == []


def test_properties_and_rules_survive_kill_9(rules_mq):
    mq = rules_mq  # Killed and started again: ready for a test after it.
    assert send(mq, "PUT", "/_mq/properties", [["jobs-.*", {"retry": 6, "delay": 0.5}]]).status == 200
    set_props(mq, "jobs-a", {"timeout": 0.5, "dead_letter_queue": "jobs-graveyard"}, method="PUT")
    before = props(mq, "jobs-a")
    restart(mq)
    after = props(mq, "jobs-a")
    assert after == before
    assert after["properties"]["retry"] == 6 and after["own"]["timeout"] == 0.5
    assert mq.request("GET", "/_mq/properties").json() == [["jobs-.*", {"retry": 6, "delay": 0.5}]]
    # ... and still drive behaviour: the rule's delay, the queue's own timeout.
    resp = add(mq, "jobs-a", b"x")
    assert "due" in resp.json()
    assert fetch(mq, "jobs-a").status == 204
    first, _ = fetch_when_ready(mq, "jobs-a")
    again, _ = fetch_when_ready(mq, "jobs-a")
    assert again.header("X-Attempts") == "2"
    assert again.header("X-Message-Id") == first.header("X-Message-Id") == resp.header("X-Message-Id")
