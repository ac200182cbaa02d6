"""Every REST route takes only the query parameters its method declares (`accepts` in
http/api.py): any other, such as a misspelled option, is a 400 that names it. The OpenAPI
document lists the same parameters, route by route, and every route an op declares
(`rest=`, mq.operations.wire) with its method, query parameters and status."""

import pytest
import tornado.httputil
import yaml

from mq.config import Options
from mq.http.api import query_parameters
from mq.http.front import make_app
from mq.operations import OPS
from repo_support import REPO
from support import poll_for, ready_daemon

METHODS = ("get", "put", "post", "patch", "delete", "head")
#: Read with libyaml's loader: the same document in a tenth of the pure-Python one's time,
#: which every xdist worker spends collecting.
DOCUMENT = yaml.load((REPO / "core" / "openapi.yaml").read_text(), Loader=yaml.CSafeLoader)
#: A concrete value for each path parameter of the document; fixed, so that every xdist
#: worker collects the same test ids.
PATH_VALUES = {"queue": "qp-q", "id": "0f1e2d3c-4b5a-4697-8877-665544332211", "file": "overview.js"}


def documented_parameters(path_item: dict, operation: dict) -> set[str]:
    """The query parameters of one operation of the document (its own and its path's)."""
    names = set()
    for parameter in path_item.get("parameters", []) + operation.get("parameters", []):
        if "$ref" in parameter:
            parameter = DOCUMENT["components"]["parameters"][parameter["$ref"].rpartition("/")[2]]
        if parameter["in"] == "query":
            names.add(parameter["name"])
    return names


def operations() -> list[tuple[str, str, set[str]]]:
    """(method, concrete path, documented query parameters) of every operation."""
    found = []
    for template, item in DOCUMENT["paths"].items():
        path = template.format(**PATH_VALUES)
        for method in METHODS:
            if method in item:
                found.append((method.upper(), path, documented_parameters(item, item[method])))
    return found


OPERATIONS = operations()
#: The ops that declare their REST route.
DECLARED = [op for op in OPS.values() if op.rest is not None]


@pytest.fixture(scope="module")
def app():
    """The front's application, for its routing table (no actor is reached). The SQS API gets
    a port of its own: none of its routes is in the document, and it needs a queue service."""
    return make_app(service=None, options=Options(sqs_port=1))


@pytest.mark.parametrize(("method", "path", "documented"), OPERATIONS,
                         ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_each_route_declares_the_parameters_the_document_lists(app, method, path, documented):
    request = tornado.httputil.HTTPServerRequest(
        start_line=tornado.httputil.RequestStartLine(method, path, "HTTP/1.1"),
        headers=tornado.httputil.HTTPHeaders({"Host": "127.0.0.1"}))
    handler = app.find_handler(request).handler_class
    assert set(query_parameters(handler, method)) == documented


@pytest.mark.parametrize("op", DECLARED, ids=[op.op for op in DECLARED])
def test_the_document_lists_each_route_an_op_declares_as_declared(op):
    item = DOCUMENT["paths"].get(op.rest.path)
    assert item is not None, f"{op.op}: {op.rest.path} is not in core/openapi.yaml"
    method = item.get(op.rest.method.lower())
    assert method is not None, f"{op.op}: {op.rest.method} {op.rest.path} is not documented"
    assert documented_parameters(item, method) == set(op.rest.query)
    assert str(op.rest.status) in method["responses"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon for the module."""
    yield from ready_daemon(tmp_path_factory.mktemp("query"), workers=1)


def test_a_misspelled_option_is_a_400_that_names_it_and_nothing_is_added(daemon):
    resp = daemon.request("POST", "/qp-typo/messages?dealy=5", b"x")
    assert resp.status == 400 and resp.json()["error"] == "invalid"
    assert "'dealy'" in resp.json()["message"] and "delay" in resp.json()["message"]
    assert daemon.request("GET", "/qp-typo/messages").status in (204, 404)


@pytest.mark.parametrize(("method", "path", "documented"), OPERATIONS,
                         ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_every_route_refuses_a_parameter_it_does_not_take(daemon, method, path, documented):
    known = {"qre": "qp-.*", "reply": "ack", "max": "1", "wait": "0"}
    query = "&".join(f"{name}={known.get(name, '1')}" for name in sorted(documented))
    body = None if method in ("GET", "HEAD", "DELETE") else b""
    resp = daemon.request(method, f"{path}?{query}&zz_unknown=1".replace("?&", "?"), body)
    assert resp.status == 400, (resp.status, resp.body)
    assert "unknown query parameter 'zz_unknown'" in resp.json()["message"]
    # The queue the routes name was never made by any of them.
    poll_for(lambda: daemon.request("GET", "/qp-q").status == 404, 5, what="no queue qp-q")
