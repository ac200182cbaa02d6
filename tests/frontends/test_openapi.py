"""The OpenAPI document (core/openapi.yaml, linked from docs/openapi.yaml) against a real daemon.

schemathesis generates requests for every operation from the document, sends them to a running
mq and fails on a reply whose status, headers, content type or JSON body the document does not
allow, and on any 5xx but a 503 with Retry-After (the one a client is told to retry).
"""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename
from schemathesis import GenerationMode
from schemathesis.checks import (content_type_conformance, response_headers_conformance,
                                 response_schema_conformance, status_code_conformance)
from schemathesis.transport.requests import ManagedCookiesSession

from support import ready_daemon
from repo_support import REPO

SPEC = REPO / "core" / "openapi.yaml"

schema = schemathesis.openapi.from_path(SPEC)
# Valid requests: the document promises how each of them is answered.
schema.config.generation.update(modes=[GenerationMode.POSITIVE])
#: The same operations with requests the document forbids (a bad name, a wrong type, a
#: missing parameter): which 4xx each deserves is test_hostile_input.py's business, but none
#: may be a server error.
hostile = (schemathesis.openapi.from_path(SPEC)
           # Operations that take no parameter and no body have no invalid request.
           .exclude(path_regex="^/_mq/(health|openapi|stats|dashboard$)")
           .exclude(path=["/", "/metrics", "/health"])
           .exclude(path="/_mq/properties", method=["GET", "DELETE"]))
hostile.config.generation.update(modes=[GenerationMode.NEGATIVE])

#: The longest a generated long poll may wait. The document allows up to 20 s; a queue the run
#: created and left empty would make each such request wait that long, and what a long poll
#: waits for is test_delivery_long_poll.py's subject, not this file's.
MAX_TEST_WAIT = 0.1


@schemathesis.check
def no_server_error_but_retryable(ctx, response, case) -> None:
    """A 5xx is a bug unless it is the 503 with Retry-After that asks the client to retry."""
    status = response.status_code
    if status >= 500 and not (status == 503 and response.headers.get("retry-after")):
        raise AssertionError(f"{case.operation.label} answered {status}: {response.content[:500]!r}")


@schemathesis.serializer("application/x-ndjson")
def ndjson_text(ctx, value) -> dict:
    """A batch add's JSON lines body as generated (a string, most often not JSON lines)."""
    return {"data": value.encode() if isinstance(value, str) else str(value).encode()}


CHECKS = [no_server_error_but_retryable, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon for every operation: starting one per operation would cost more than the run."""
    yield from ready_daemon(tmp_path_factory.mktemp("openapi"), workers=2, timeout=5)


@pytest.fixture(scope="module")
def http():
    """The requests session of the generated requests, the kind schemathesis makes for each
    one, made once: a new one per request cost its set-up and reads of the environment's proxy
    settings and ~/.netrc (trust_env), most of the client's time per request, and none of them
    applies to 127.0.0.1. No header of its own (schemathesis sends none), no cookie kept."""
    session = ManagedCookiesSession()
    session.trust_env = False
    session.headers.clear()
    yield session
    session.close()


def send(case, daemon, http, checks):
    """The case sent to the daemon and checked, on a connection of its own (as with a session
    of its own: closed after the call)."""
    try:
        case.call_and_validate(base_url=f"http://127.0.0.1:{daemon.port}", session=http,
                               checks=checks, timeout=15)
    finally:
        http.close()


def shorter(wait):
    """wait capped at MAX_TEST_WAIT when it is a number of seconds; anything else as it is."""
    try:
        return min(float(wait), MAX_TEST_WAIT) if float(wait) >= 0 else wait
    except (TypeError, ValueError):
        return wait


def shorten_long_poll(case) -> None:
    """Cap a generated wait (query or header) at MAX_TEST_WAIT seconds."""
    if case.query and "wait" in case.query:
        case.query["wait"] = shorter(case.query["wait"])
    if case.headers and "X-Wait" in case.headers:
        case.headers["X-Wait"] = str(shorter(case.headers["X-Wait"]))


#: Each operation's test is built when it runs, not at collection: schemathesis makes an
#: operation's coverage-phase requests when it builds its test, and every xdist worker collects
#: every test of the suite, so building them at collection cost each worker seconds of CPU
#: for the operations some other worker runs. Each test is one operation, picked by its label.
OPERATIONS = [result.ok().label for result in schema.get_all_operations()]
HOSTILE_OPERATIONS = [result.ok().label for result in hostile.get_all_operations()]
#: The label of the operation the running test is about. A schema from a fixture keeps only the
#: filters given to from_fixture (its own are replaced), so the filter reads it from here.
RUNNING = {"operation": ""}


def is_running(ctx) -> bool:
    """Whether the operation is the one the running test is about."""
    return ctx.operation.label == RUNNING["operation"]


@pytest.fixture
def valid_document(operation):
    """The document for an operation's valid requests."""
    RUNNING["operation"] = operation
    return schema


@pytest.fixture
def hostile_document(operation):
    """The document for an operation's invalid requests."""
    RUNNING["operation"] = operation
    return hostile


@pytest.mark.parametrize("operation", OPERATIONS)
@schemathesis.pytest.from_fixture("valid_document").include(is_running).parametrize()
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_every_operation_answers_as_documented(case, daemon, http):
    shorten_long_poll(case)
    send(case, daemon, http, CHECKS)


#: Random invalid requests per operation. Fewer than the valid ones' 25: before them,
#: schemathesis's coverage phase sends, for every parameter and body field, each way the
#: document can be broken (a wrong type, a pattern or bound passed, a required one missing, an
#: unknown one added), and a random invalid request costs 50 to 300 ms to draw (the negated
#: schemas are filters that keep failing), most of this module's time. The random ones add
#: combinations, drawn anew at every run.
HOSTILE_EXAMPLES = 10


@pytest.mark.parametrize("operation", HOSTILE_OPERATIONS)
@schemathesis.pytest.from_fixture("hostile_document").include(is_running).parametrize()
@settings(max_examples=HOSTILE_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_invalid_requests_are_never_server_errors(case, daemon, http):
    shorten_long_poll(case)
    send(case, daemon, http, [no_server_error_but_retryable])


def test_a_message_life_answers_as_documented(daemon):
    """The answers random names rarely reach (an existing queue's 200, a fetch's 200 and its
    receipt, ext, a stale receipt's 409, a nack to the dead-letter queue, redrive, 413), one
    after the other on one queue, each checked against the document like the generated ones.

    (A schemathesis state machine that follows the document's links would do this at random,
    but hypothesis replays its steps against a daemon whose state has moved on and then reports
    its own flakiness instead of what went wrong.)
    """
    base_url = f"http://127.0.0.1:{daemon.port}"

    def call(method, path, status, path_parameters=None, query=None, headers=None,
             body=None, media_type=None):
        payload = {} if body is None else {"body": body, "media_type": media_type}
        case = schema[path][method].Case(path_parameters=path_parameters or {}, query=query,
                                         headers=headers, **payload)
        resp = case.call_and_validate(base_url=base_url, checks=CHECKS, timeout=15)
        assert resp.status_code == status, (method, path, resp.status_code, resp.content)
        return resp

    walk = {"queue": "walk"}
    call("PUT", "/{queue}", 201, walk)
    call("PUT", "/{queue}", 200, walk)
    call("PUT", "/{queue}/properties", 200, walk, body={"retry": 0, "max_body_bytes": 64},
         media_type="application/json")
    assert call("GET", "/{queue}", 200, walk).json()["ready"] == 0
    call("POST", "/{queue}/messages", 413, walk, body="x" * 65, media_type="text/plain")
    added = call("POST", "/{queue}/messages", 201, walk, body="hello", media_type="text/plain")
    later = call("POST", "/{queue}/messages", 201, walk, query={"delay": 60, "dedup_id": "k"},
                 body=b"later", media_type="application/octet-stream")
    assert "due" in later.json()
    again = call("POST", "/{queue}/messages", 200, walk, headers={"X-Dedup-Id": "k"},
                 body=b"later", media_type="application/octet-stream")
    assert again.json()["id"] == later.json()["id"]
    peeked = call("GET", "/{queue}/peek", 200, walk, query={"max": 5}).json()["messages"]
    assert [m["id"] for m in peeked] == [added.json()["id"]]

    fetched = call("GET", "/{queue}/messages", 200, walk)
    message_id, receipt = fetched.headers["x-message-id"][0], fetched.headers["x-receipt"][0]
    one = {**walk, "id": message_id}
    call("POST", "/{queue}/messages/{id}", 200, one, query={"reply": "ext", "seconds": 30},
         headers={"X-Receipt": receipt})
    call("POST", "/{queue}/messages/{id}", 409, one,
         query={"reply": "ack", "receipt": f"{message_id}.9"})
    dead = call("POST", "/{queue}/messages/{id}", 200, one,
                query={"reply": "nack", "receipt": receipt})
    assert dead.json() == {"id": message_id, "dead_letter_queue": "walk.dead"}
    assert call("POST", "/{queue}/redrive", 200, walk).json()["moved"] == 1

    call("PATCH", "/{queue}/properties", 200, walk, body={"retry": 2},
         media_type="application/json")
    fetched = call("GET", "/{queue}/messages", 200, walk, query={"wait": 1})
    receipt = fetched.headers["x-receipt"][0]
    call("POST", "/{queue}/messages/{id}", 204, one, query={"reply": "nack", "receipt": receipt})
    fetched = call("GET", "/{queue}/messages", 200, walk, headers={"X-Wait": "1"})
    receipt = fetched.headers["x-receipt"][0]
    call("DELETE", "/{queue}/messages/{id}", 204, one, query={"receipt": receipt})
    call("DELETE", "/{queue}/messages/{id}", 404, one)
    call("GET", "/{queue}/messages", 204, walk)

    rules = [["walk.*", {"dedup_window": 60}], [".*", {"retry": 5}]]
    call("PUT", "/_mq/properties", 200, body=rules, media_type="application/json")
    assert call("GET", "/_mq/properties", 200).json() == [["walk.*", {"dedup_window": 60.0}],
                                                          [".*", {"retry": 5}]]
    call("DELETE", "/_mq/properties", 200)
    call("DELETE", "/{queue}/properties", 200, walk)
    assert call("POST", "/{queue}/purge", 200, walk).json() == {"queue": "walk", "purged": 1}
    call("DELETE", "/{queue}", 204, walk)
    call("GET", "/{queue}", 404, walk)
    call("GET", "/_mq/health", 200)


def test_the_daemon_serves_the_committed_document(daemon):
    resp = daemon.request("GET", "/_mq/openapi.yaml")
    assert resp.status == 200
    assert resp.header("Content-Type") == "application/yaml"
    assert resp.body == SPEC.read_bytes()
    # docs/ holds a link to the one copy, not a second copy that could drift.
    assert (REPO / "docs" / "openapi.yaml").resolve() == SPEC


def test_the_served_document_is_valid_openapi(daemon, tmp_path):
    # schemathesis uses a document it can read, not only a valid one: a description split by
    # an unquoted comma in a YAML flow mapping still generated requests.
    served = tmp_path / "openapi.yaml"
    served.write_bytes(daemon.request("GET", "/_mq/openapi.yaml").body)
    document, _ = read_from_filename(str(served))
    validate(document)
