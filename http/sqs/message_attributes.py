"""Message attributes and message system attributes: checked as SQS checks them, kept with
the message (binary values as bytes), and given back in the protocol's form (base64)."""

import base64
import binascii
import re

from mq.http.sqs.errors import invalid

#: Most message attributes on one message.
MAX_ATTRIBUTES = 10
#: Letters and digits (SQS takes non-ASCII ones too), underscore, hyphen and period.
ATTRIBUTE_NAME = re.compile(r"[\w.-]{1,256}")
#: Characters SQS refuses in text: outside XML 1.0's.
BAD_CHARACTER = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[^\s]{1,256})?")
#: The system attributes a sender may set.
SYSTEM_NAMES = ("AWSTraceHeader",)
#: MessageAttributeNames of a receive that ask for every attribute.
ALL_NAMES = ("All", "*", ".*")


def check_name(name) -> str:
    """A message attribute name, checked as SQS checks it."""
    lower = name.lower() if isinstance(name, str) else ""
    if (not isinstance(name, str) or not ATTRIBUTE_NAME.fullmatch(name) or name.startswith(".")
            or name.endswith(".") or ".." in name or lower.startswith(("aws.", "amazon."))):
        raise invalid(f"The message attribute name '{name}' is invalid. Attribute name can "
                      "contain A-Z, a-z, 0-9, underscore (_), hyphen (-), and period (.) "
                      "characters.")
    return name


def check_value(name: str, value) -> dict:
    """One attribute value as stored: {"DataType", "StringValue" or "BinaryValue" bytes}."""
    if not isinstance(value, dict):
        raise invalid(f"The message attribute '{name}' must contain non-empty message "
                      "attribute value.")
    data_type = value.get("DataType")
    if not data_type:
        raise invalid(f"The message attribute '{name}' must contain non-empty message "
                      "attribute type.")
    if not isinstance(data_type, str) or not DATA_TYPE.fullmatch(data_type):
        raise invalid(f"The message attribute '{name}' has an invalid message attribute type, "
                      "the set of supported type prefixes is Binary, Number, and String.")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        raise invalid(f"Message attribute list values in '{name}' are not supported.")
    if data_type.startswith("Binary"):
        raw = value.get("BinaryValue")
        if raw is None or raw == "" or raw == b"":
            raise invalid(f"The message attribute '{name}' with type 'Binary' must use field "
                          "'Binary'.")
        if isinstance(raw, str):
            try:
                raw = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise invalid(f"The message attribute '{name}' has an invalid binary "
                              "value.") from None
        return {"DataType": data_type, "BinaryValue": bytes(raw)}
    text = value.get("StringValue")
    if text is None or text == "" or not isinstance(text, str):
        raise invalid(f"Message (user) attribute '{name}' must contain a non-empty value of type "
                      f"'{data_type}'.")
    if BAD_CHARACTER.search(text):
        raise invalid(f"Message (user) attribute '{name}' contains an invalid character: only "
                      "#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF "
                      "are allowed.")
    if data_type.startswith("Number"):
        try:
            float(text)
        except ValueError:
            raise invalid(f"Can't cast the value of message (user) attribute '{name}' to a "
                          "number.") from None
    return {"DataType": data_type, "StringValue": text}


def check_attributes(attributes) -> dict:
    """The MessageAttributes of a send, checked and converted for storage."""
    if not attributes:
        return {}
    if not isinstance(attributes, dict):
        raise invalid("MessageAttributes must be a map of names to values.")
    if len(attributes) > MAX_ATTRIBUTES:
        raise invalid(f"Number of message attributes [{len(attributes)}] exceeds the allowed "
                      f"maximum [{MAX_ATTRIBUTES}].")
    return {check_name(name): check_value(name, value) for name, value in attributes.items()}


def check_system_attributes(attributes) -> dict:
    """The MessageSystemAttributes of a send (only AWSTraceHeader, a String)."""
    if not attributes:
        return {}
    if not isinstance(attributes, dict):
        raise invalid("MessageSystemAttributes must be a map of names to values.")
    checked = {}
    for name, value in attributes.items():
        if name not in SYSTEM_NAMES:
            raise invalid(f"Message system attribute name '{name}' is invalid.")
        checked[name] = check_value(name, value)
        if checked[name]["DataType"] != "String":
            raise invalid(f"The message system attribute '{name}' must be of type String.")
    return checked


def size(attributes: dict) -> int:
    """Bytes the attributes count toward the message size: names, types and values."""
    total = 0
    for name, value in attributes.items():
        total += len(name.encode()) + len(value["DataType"].encode())
        total += len(value["StringValue"].encode()) if "StringValue" in value else len(value["BinaryValue"])
    return total


def selected(attributes: dict, wanted: list[str]) -> dict:
    """The stored attributes a receive asked for: All (or * or .*), a prefix 'name.*', or names."""
    if not attributes or not wanted:
        return {}
    if any(name in ALL_NAMES for name in wanted):
        return dict(attributes)
    prefixes = tuple(w[:-1] for w in wanted if w.endswith(".*"))
    return {name: value for name, value in attributes.items()
            if name in wanted or (prefixes and name.startswith(prefixes))}


def as_sent(attributes: dict) -> dict:
    """Stored attributes in the protocol's form: binary values in base64."""
    out = {}
    for name, value in attributes.items():
        if "BinaryValue" in value:
            out[name] = {"DataType": value["DataType"],
                         "BinaryValue": base64.b64encode(value["BinaryValue"]).decode()}
        else:
            out[name] = {"DataType": value["DataType"], "StringValue": value["StringValue"]}
    return out
