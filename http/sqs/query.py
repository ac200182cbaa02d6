"""The query protocol of older SQS clients: form parameters (`Action=...`, flattened lists and
maps such as `Attribute.1.Name`) into the JSON protocol's shapes, and results into the XML
documents SQS sends. Shapes follow botocore's SQS model (service-2.json, 2012-11-05)."""

from xml.sax.saxutils import escape

from mq.http.sqs.errors import SqsError

XMLNS = "http://queue.amazonaws.com/doc/2012-11-05/"
#: Operations of other services answered on the SQS endpoint, with their documents' namespace.
OTHER_XMLNS = {"GetCallerIdentity": "https://sts.amazonaws.com/doc/2011-06-15/"}
#: A carriage return as a character reference, as SQS writes it: a parser turns a literal one
#: (and CR LF) into a line feed, so a body or attribute value would not come back as sent.
ESCAPES = {"\r": "&#xD;"}

#: Flattened request members: query name -> (JSON name, kind, key name, value name).
REQUEST_MEMBERS = {
    "Attribute": ("Attributes", "map", "Name", "Value"),
    "MessageAttribute": ("MessageAttributes", "map", "Name", "Value"),
    "MessageSystemAttribute": ("MessageSystemAttributes", "map", "Name", "Value"),
    "Tag": ("Tags", "map", "Key", "Value"),
    "AttributeName": ("AttributeNames", "list", None, None),
    "MessageAttributeName": ("MessageAttributeNames", "list", None, None),
    "MessageSystemAttributeName": ("MessageSystemAttributeNames", "list", None, None),
    "TagKey": ("TagKeys", "list", None, None),
    "AWSAccountId": ("AWSAccountIds", "list", None, None),
    "ActionName": ("Actions", "list", None, None),
    "SendMessageBatchRequestEntry": ("Entries", "list", None, None),
    "DeleteMessageBatchRequestEntry": ("Entries", "list", None, None),
    "ChangeMessageVisibilityBatchRequestEntry": ("Entries", "list", None, None),
    # Some clients send the JSON names with indexes too.
    "Entries": ("Entries", "list", None, None),
}

#: Flattened result lists: JSON name -> the element name of each item.
RESULT_LISTS = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
}
#: Flattened result maps: JSON name -> (element name, key name, value name).
RESULT_MAPS = {
    "Attributes": ("Attribute", "Name", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "Tags": ("Tag", "Key", "Value"),
}


def _tree(form: dict[str, str]) -> dict:
    """Dotted names as nested dicts: {'A.1.Name': v} -> {'A': {'1': {'Name': v}}}."""
    tree: dict = {}
    for key, value in form.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SqsError("MalformedQueryString", f"Parameter {key} is given twice.")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise SqsError("MalformedQueryString", f"Parameter {key} is given twice.")
        node[parts[-1]] = value
    return tree


def _indexed(node) -> list:
    """The members of a flattened list in index order ('1', '2', ...)."""
    if not isinstance(node, dict):
        return [node]
    return [node[k] for k in sorted(node, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))]


def _shape(tree: dict) -> dict:
    """A tree of query parameters in the JSON protocol's shape."""
    out = {}
    for key, node in tree.items():
        member = REQUEST_MEMBERS.get(key)
        if member is None:
            out[key] = _shape(node) if isinstance(node, dict) else node
            continue
        name, kind, key_name, value_name = member
        items = _indexed(node)
        if kind == "list":
            out[name] = [_shape(i) if isinstance(i, dict) else i for i in items]
        else:
            mapping = {}
            for item in items:
                if not isinstance(item, dict) or key_name not in item:
                    raise SqsError("MissingParameter", f"The request must contain the parameter "
                                   f"{key}.N.{key_name}.")
                value = item.get(value_name)
                mapping[item[key_name]] = _shape(value) if isinstance(value, dict) else value
            out[name] = mapping
    return out


def decode(form: dict[str, str]) -> tuple[str, dict]:
    """(operation, parameters in the JSON shape) of a query request's parameters."""
    action = form.pop("Action", None)
    form.pop("Version", None)
    if not action:
        raise SqsError("MissingParameter", "The request must contain the parameter Action.")
    params = _shape(_tree(form))
    if "tags" not in params and action == "CreateQueue" and "Tags" in params:
        params["tags"] = params.pop("Tags")
    return action, params


def _element(name: str, value) -> str:
    """One XML element of a result value."""
    if isinstance(value, dict):
        return f"<{name}>{_members(value)}</{name}>"
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"<{name}>{escape(str(value), ESCAPES)}</{name}>"


def _members(result: dict, batch_entry: str = "") -> str:
    """The XML of a structure's members, lists and maps flattened as SQS flattens them."""
    parts = []
    for key, value in result.items():
        if key == "Successful":
            parts += [_element(batch_entry, item) for item in value]
            continue
        if key in RESULT_MAPS and isinstance(value, dict):
            element, key_name, value_name = RESULT_MAPS[key]
            parts += [f"<{element}>{_element(key_name, k)}{_element(value_name, v)}</{element}>"
                      for k, v in value.items()]
        elif key in RESULT_LISTS or key in RESULT_MAPS:
            element = RESULT_LISTS[key] if key in RESULT_LISTS else RESULT_MAPS[key][0]
            parts += [_element(element, item) for item in value]
        else:
            parts.append(_element(key, value))
    return "".join(parts)


def encode(operation: str, result: dict | None, request_id: str) -> bytes:
    """The XML document of a successful query request."""
    body = ""
    if result is not None:
        body = (f"<{operation}Result>{_members(result, operation + 'ResultEntry')}"
                f"</{operation}Result>")
    xmlns = OTHER_XMLNS.get(operation, XMLNS)
    return (f'<?xml version="1.0"?><{operation}Response xmlns="{xmlns}">{body}'
            f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
            f"</{operation}Response>").encode()


def encode_error(error: SqsError, request_id: str) -> bytes:
    """The XML error document of the query protocol."""
    kind = "Sender" if error.sender else "Receiver"
    return (f'<?xml version="1.0"?><ErrorResponse xmlns="{XMLNS}"><Error><Type>{kind}</Type>'
            f"<Code>{escape(error.code)}</Code><Message>{escape(error.message)}</Message>"
            f"<Detail/></Error><RequestId>{request_id}</RequestId></ErrorResponse>").encode()
