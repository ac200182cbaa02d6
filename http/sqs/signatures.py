"""AWS Signature Version 4 of SQS requests: the region a request was signed for, and, when
--sqs-credentials names a credentials file, the signature checked with botocore's own SigV4
code (botocore is then needed: the `sqs` extra)."""

import configparser
import hmac
import re

from mq.http.sqs.errors import SqsError

AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/"
    r"(?P<service>[^/,\s]+)/aws4_request\s*,\s*SignedHeaders=(?P<headers>[^,\s]+)\s*,\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})\s*$")
REGION = re.compile(r"Credential=[^/,\s]+/\d{8}/([^/,\s]+)/")


def signed_region(headers) -> str | None:
    """The region a request's Authorization header names, if any."""
    found = REGION.search(headers.get("Authorization", ""))
    return found.group(1) if found else None


def read_credentials(path: str) -> dict[str, str]:
    """Access key id -> secret, from an AWS credentials file (INI: a section per profile with
    aws_access_key_id and aws_secret_access_key); ValueError when it has none."""
    parser = configparser.ConfigParser(interpolation=None)
    with open(path, encoding="utf-8") as f:
        parser.read_file(f)
    keys = {parser[s]["aws_access_key_id"].strip(): parser[s]["aws_secret_access_key"].strip()
            for s in parser.sections()
            if "aws_access_key_id" in parser[s] and "aws_secret_access_key" in parser[s]}
    if not keys:
        raise ValueError(f"{path}: no section with aws_access_key_id and aws_secret_access_key")
    return keys


class SignatureCheck:
    """Checks SigV4 signatures against the keys of a credentials file."""

    def __init__(self, path: str):
        try:
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.compat import HTTPHeaders
            from botocore.credentials import Credentials
        except ImportError:
            raise RuntimeError("--sqs-credentials needs botocore: pip install 'mq[sqs]'") from None
        self.keys = read_credentials(path)
        self.request_class, self.credentials_class = AWSRequest, Credentials

        class Verifier(SigV4Auth):
            """SigV4Auth over exactly the headers the client signed."""

            def __init__(self, credentials, service, region, signed):
                super().__init__(credentials, service, region)
                self.signed = signed

            def headers_to_sign(self, request):
                """The headers the client named in SignedHeaders, with their values."""
                chosen = HTTPHeaders()
                for name in self.signed:
                    chosen[name] = request.headers.get(name, "")
                return chosen

        self.verifier_class = Verifier

    def check(self, method: str, url: str, headers, body: bytes) -> str:
        """The access key id that signed the request; raise the SqsError SQS answers an
        unsigned, unknown or wrongly signed request with."""
        authorization = headers.get("Authorization")
        if not authorization:
            raise SqsError("MissingAuthenticationToken", "Request is missing Authentication Token")
        parts = AUTHORIZATION.match(authorization.strip())
        amz_date = headers.get("X-Amz-Date")
        if parts is None or not amz_date:
            raise SqsError("IncompleteSignature", "Authorization header requires 'Credential', "
                           "'Signature', 'SignedHeaders' and an X-Amz-Date header.")
        secret = self.keys.get(parts["key"])
        if secret is None:
            raise SqsError("InvalidClientTokenId", "The security token included in the request "
                           "is invalid.")
        signed = parts["headers"].split(";")
        request = self.request_class(method=method, url=url, data=body,
                                     headers={name: headers.get(name, "") for name in signed})
        request.context["timestamp"] = amz_date
        verifier = self.verifier_class(self.credentials_class(parts["key"], secret),
                                       parts["service"], parts["region"], signed)
        canonical = verifier.canonical_request(request)
        expected = verifier.signature(verifier.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, parts["signature"]):
            raise SqsError("SignatureDoesNotMatch", "The request signature we calculated does "
                           "not match the signature you provided. Check your AWS Secret Access "
                           "Key and signing method. Consult the service documentation for details.")
        return parts["key"]
