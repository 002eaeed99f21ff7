"""The lab's Kafka client settings: one set, in Kafka's own client property names, for every part
of the lab that talks to Kafka: the jobs' Spark source and sink (`spark_options`, as `kafka.`
options) and every kafka-python client (`client_config`: generators, `joinlab topics`, verify, the
notebooks, the lookup service, the room's board). docs/operations.md#your-own-kafka.

Where they come from, the later winning:
1. the properties file $LAB_KAFKA_PROPERTIES names (a Kafka `client.properties`: `key=value`,
   `#` or `!` comments, `\\` at a line's end continues it);
2. every `KAFKA_` variable but those Kafka's own scripts and image read for the JVM
   (`NOT_PROPERTIES`), named as Apache Kafka's image names them: `KAFKA_` dropped, lower case,
   `_` is `.`, `__` is `_`, `___` is `-` (`KAFKA_SASL_JAAS_CONFIG` is `sasl.jaas.config`).

A secret (`sasl.jaas.config`, any `*password*`, `ssl.keystore.key`) is never shown: `KafkaSettings`
prints it as `[hidden]`, and the lab's messages name properties, not values. What kafka-python
cannot do (a JKS truststore, GSSAPI, OAUTHBEARER) is refused with one line naming the property
and what to use instead, rather than dropped: a client that quietly connects another way is worse.
"""
from __future__ import annotations

import os
import re
import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROPERTIES_VARIABLE = "LAB_KAFKA_PROPERTIES"
# What Kafka's scripts (bin/kafka-run-class.sh, kafka-server-start.sh) and its Docker image read
# for the JVM and its logging, never client properties; and the lab's own KAFKA_ variables.
NOT_PROPERTIES = frozenset({
    "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_GC_LOG_OPTS",
    "KAFKA_JMX_OPTS", "KAFKA_DEBUG", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_VERSION", "KAFKA_IMAGE", "KAFKA_CLUSTER_ID",
    "KAFKA_HOME", "KAFKA_LOG_DIR",
})
# Properties whose empty value is one: no host name check.
EMPTY_MEANS = frozenset({"ssl.endpoint.identification.algorithm"})
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Whose value is a secret: shown nowhere.
_SECRET = re.compile(r"password|jaas|ssl\.keystore\.key$|secret|token", re.I)
# The JAAS line's options: username="alice" password="..." (quoted, as Kafka's parser wants them)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
# Properties kafka-python has under its own name (the value converted where needed).
_PLAIN_NAMES = {"client.id": ("client_id", str), "request.timeout.ms": ("request_timeout_ms", int),
                "connections.max.idle.ms": ("connections_max_idle_ms", int),
                "reconnect.backoff.ms": ("reconnect_backoff_ms", int),
                "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", int),
                "retry.backoff.ms": ("retry_backoff_ms", int), "metadata.max.age.ms": ("metadata_max_age_ms", int)}
# Security properties the lab's Python clients cannot honour, and what to give instead.
_REFUSED = {
    "sasl.login.callback.handler.class": "a Java class: the lab's Python clients take PLAIN or SCRAM "
                                         "credentials in sasl.jaas.config",
    "sasl.client.callback.handler.class": "a Java class: the lab's Python clients take PLAIN or SCRAM "
                                          "credentials in sasl.jaas.config",
    "ssl.keystore.certificate.chain": "give ssl.keystore.location, a PEM file with the key and its "
                                      "certificate chain (ssl.keystore.type=PEM)",
    "ssl.keystore.key": "give ssl.keystore.location, a PEM file with the key and its certificate chain "
                        "(ssl.keystore.type=PEM)",
    "ssl.truststore.password": "a JKS or PKCS12 truststore: give the CA certificates as PEM instead "
                               "(ssl.truststore.type=PEM with ssl.truststore.certificates)",
    "ssl.keystore.password": "a JKS or PKCS12 keystore: give ssl.keystore.type=PEM with ssl.keystore.location, "
                             "a PEM file (its key's password, if any, in ssl.key.password)",
}


class KafkaSettingsError(ValueError):
    """A Kafka setting the lab cannot use; the message names the property and what to give instead."""


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's keys and values: `key=value` or `key: value` or `key value`, `#` and
    `!` comment lines, a `\\` at a line's end joining the next line (its leading blanks dropped),
    and the escapes `\\n`, `\\t`, `\\\\`, `\\=`, `\\:`, `\\ `, `\\uXXXX`."""
    out: dict[str, str] = {}
    logical, pending = [], ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2:  # an odd number of backslashes: the last one continues it
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] in "=: \t":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    def one(m: re.Match) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}.get(c, c)
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text, flags=re.S)


_PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.S)


def pem_certificates(text: str) -> str:
    """PEM certificates as OpenSSL reads them, from Kafka's looser form: a properties file's value
    joined from continued lines has the base64 on one line, with blanks (Kafka strips them)."""
    bodies = ["".join(body.split()) for body in _PEM.findall(text)]
    if not bodies:
        raise ValueError("no -----BEGIN CERTIFICATE----- ... -----END CERTIFICATE----- in it")
    return "".join("-----BEGIN CERTIFICATE-----\n"
                   + "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
                   + "\n-----END CERTIFICATE-----\n" for body in bodies)


def variable_property(name: str) -> str:
    """`KAFKA_SASL_JAAS_CONFIG` -> `sasl.jaas.config` (Apache Kafka's image's rule: `___` is `-`,
    `__` is `_`, `_` is `.`)."""
    return name.removeprefix("KAFKA_").lower().replace("_", ".").replace("...", "-").replace("..", "_")


def secret(key: str) -> bool:
    return bool(_SECRET.search(key))


@dataclass(frozen=True)
class KafkaSettings:
    """Kafka client properties (Kafka's own names); never shows a secret's value."""
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    source: str = ""  # where they came from, for messages: the file and/or the variables

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={'[hidden]' if secret(k) else v}" for k, v in sorted(self.properties.items()))
        return f"KafkaSettings({shown})"

    __str__ = __repr__

    @property
    def bootstrap(self) -> str | None:
        return self.properties.get("bootstrap.servers") or None

    @property
    def protocol(self) -> str:
        return self.properties.get("security.protocol", "PLAINTEXT").upper()

    def spark_options(self) -> dict[str, str]:
        """The Kafka source's and sink's options: `kafka.` and each property but bootstrap.servers
        (the source and sink set it). Checked first: the job refuses what its Python clients would."""
        self.client_config()
        return {f"kafka.{k}": v for k, v in self.properties.items() if k != "bootstrap.servers"}

    def client_config(self) -> dict:
        """kafka-python's keyword arguments for these properties (none for plain PLAINTEXT)."""
        p = self.properties
        where = f" ({self.source})" if self.source else ""
        config: dict = {}
        for key, hint in _REFUSED.items():
            if p.get(key):
                raise KafkaSettingsError(f"Kafka setting {key}{where}: not supported by the lab's Python clients: {hint}.")
        protocol = self.protocol
        if protocol not in SECURITY_PROTOCOLS:
            raise KafkaSettingsError(f"Kafka setting security.protocol={p.get('security.protocol')}{where}: "
                                     f"give one of {', '.join(SECURITY_PROTOCOLS)}.")
        if protocol != "PLAINTEXT":
            config["security_protocol"] = protocol
        if protocol.startswith("SASL_"):
            config.update(self._sasl(where))
        if protocol.endswith("SSL"):
            config["ssl_context"] = self._ssl_context(where)
        for key, (name, kind) in _PLAIN_NAMES.items():
            if key in p:
                try:
                    config[name] = kind(p[key])
                except ValueError:
                    raise KafkaSettingsError(f"Kafka setting {key}={p[key]}{where}: give a whole number.") from None
        return config

    def _sasl(self, where: str) -> dict:
        p = self.properties
        mechanism = p.get("sasl.mechanism", "GSSAPI").upper()  # Kafka's default mechanism is GSSAPI
        if mechanism not in SASL_MECHANISMS:
            raise KafkaSettingsError(
                f"Kafka setting sasl.mechanism={mechanism}{where}"
                + (" (Kafka's default when none is given)" if "sasl.mechanism" not in p else "")
                + f": the lab's Python clients support {', '.join(SASL_MECHANISMS)}: give one of them.")
        jaas = p.get("sasl.jaas.config", "")
        module = _JAAS_MODULES[mechanism]
        options = dict(_JAAS_OPTION.findall(jaas))
        if module not in jaas or "username" not in options or "password" not in options:
            raise KafkaSettingsError(
                f"Kafka setting sasl.jaas.config{where}: for {mechanism} give "
                f'`{module} required username="USER" password="PASSWORD";`'
                + ("" if jaas else " (it is not set)"))
        unquote = lambda s: re.sub(r"\\(.)", r"\1", s)  # noqa: E731
        return {"sasl_mechanism": mechanism, "sasl_plain_username": unquote(options["username"]),
                "sasl_plain_password": unquote(options["password"])}

    def _ssl_context(self, where: str) -> ssl.SSLContext:
        p = self.properties
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # Kafka's default is "https": the broker's name must be in its certificate; "" turns it off.
        context.check_hostname = p.get("ssl.endpoint.identification.algorithm", "https").strip() != ""
        inline, location = p.get("ssl.truststore.certificates"), p.get("ssl.truststore.location")
        kind = p.get("ssl.truststore.type", "PEM" if inline else "JKS").upper()  # Kafka's default type: JKS
        if (inline or location) and kind != "PEM":
            raise KafkaSettingsError(
                f"Kafka setting ssl.truststore.type={kind}{where}"
                + (" (Kafka's default when a truststore location is given)" if "ssl.truststore.type" not in p else "")
                + ": the lab's Python clients read PEM only: give ssl.truststore.type=PEM with the CA "
                  "certificates in ssl.truststore.certificates (or ssl.truststore.location, a PEM file).")
        try:
            if inline:
                context.load_verify_locations(cadata=pem_certificates(inline))
            elif location:
                context.load_verify_locations(cafile=location)
            else:
                context.load_default_certs()
        except (ssl.SSLError, OSError, ValueError) as exc:
            name = "ssl.truststore.certificates" if inline else "ssl.truststore.location"
            raise KafkaSettingsError(f"Kafka setting {name}{where}: no PEM CA certificate could be read from it "
                                     f"({getattr(exc, 'strerror', None) or exc}).") from None
        keystore = p.get("ssl.keystore.location")
        if keystore:
            if p.get("ssl.keystore.type", "JKS").upper() != "PEM":
                raise KafkaSettingsError(
                    f"Kafka setting ssl.keystore.type={p.get('ssl.keystore.type', 'JKS')}{where}: the lab's Python "
                    "clients read PEM only: give ssl.keystore.type=PEM with ssl.keystore.location, a PEM file "
                    "with the client's key and certificate chain.")
            try:
                context.load_cert_chain(keystore, password=p.get("ssl.key.password") or None)
            except (ssl.SSLError, OSError) as exc:
                raise KafkaSettingsError(f"Kafka setting ssl.keystore.location{where}: its key and certificate "
                                         f"could not be read ({getattr(exc, 'strerror', None) or exc}).") from None
        return context


def from_environment(environ: Mapping[str, str] | None = None) -> KafkaSettings:
    """The settings of this process: $LAB_KAFKA_PROPERTIES's file, then the KAFKA_ variables over it."""
    environ = os.environ if environ is None else environ
    properties: dict[str, str] = {}
    sources = []
    if path := environ.get(PROPERTIES_VARIABLE):
        try:
            properties.update(parse_properties(Path(path).expanduser().read_text()))
        except OSError as exc:
            raise KafkaSettingsError(f"{PROPERTIES_VARIABLE}={path}: cannot read it ({exc.strerror or exc}).") from None
        sources.append(f"{PROPERTIES_VARIABLE}={path}")
    named = {variable_property(k): v for k, v in environ.items()  # empty: unset, but where empty says something
             if k.startswith("KAFKA_") and k not in NOT_PROPERTIES and (v != "" or variable_property(k) in EMPTY_MEANS)}
    if named:
        sources.append("KAFKA_ variables")
    properties.update(named)
    return KafkaSettings(properties, " and ".join(sources))


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that carry this process's Kafka settings ($LAB_KAFKA_PROPERTIES and the KAFKA_
    properties), for a process the lab starts with an environment of its own (the room's board)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items()
            if k == PROPERTIES_VARIABLE or k.startswith("KAFKA_") and k not in NOT_PROPERTIES}


def settings() -> KafkaSettings:
    return from_environment()


def client_config() -> dict:
    """kafka-python's keyword arguments for this process's settings (see KafkaSettings.client_config)."""
    return settings().client_config()


def spark_options() -> dict[str, str]:
    return settings().spark_options()


# --- Saying what went wrong, in a line ------------------------------------------------------------
# kafka-python retries a broker that refuses the credentials or whose certificate it does not trust
# until its bootstrap times out, and then says only "Unable to bootstrap". Why, it does not reliably
# know: kafka-python 3.0.12 drops a response that arrives together with the broker's close, and a
# broker sends its refusal of a SASL login just so, so most attempts log only "socket disconnected".
# So after a bootstrap that failed, `login_check` goes through a connection's steps once itself,
# blocking, and says which one failed; `explain` turns that into one line.

class KafkaAccessError(RuntimeError):
    """Kafka could not be used with these settings; the message (one line) says what failed and what to check."""


CHECK_TIMEOUT_S = 5.0  # for each step of the check (connect, TLS handshake, each request's answer)


class _Closed(ConnectionError):
    """The broker closed the connection before it answered."""


def login_check(bootstrap: str, config: dict, timeout_s: float = CHECK_TIMEOUT_S) -> tuple[str, str]:
    """The first of `bootstrap`'s brokers that accepts a connection, connected to as kafka-python's
    bootstrap does (TCP; TLS with config's ssl_context; ApiVersions; the SASL login with config's
    mechanism and credentials), once. Returns (kind, what the broker or the TLS library said): kind
    is "ok", "unreachable" (no broker accepted the connection), "tls", "closed" (the broker closed
    the connection before it answered), "mechanism" (the broker does not offer it), "auth" or "slow"
    (no answer within `timeout_s`)."""
    result = ("unreachable", "")
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        host = host.strip("[]")  # an IPv6 address: [::1]:9092
        try:
            sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        except (OSError, ValueError) as exc:
            result = ("unreachable", getattr(exc, "strerror", None) or str(exc))
            continue
        try:
            with sock:
                return _login(sock, host, config)
        except ssl.SSLError as exc:
            return "tls", str(exc)
        except (socket.timeout, TimeoutError):
            return "slow", f"did not answer within {timeout_s:g} s"
        except _Closed:
            return "closed", ""
        except (ConnectionResetError, BrokenPipeError) as exc:
            return "closed", exc.strerror or type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - a check that cannot go on says what it met, not a traceback
            return "closed", f"{type(exc).__name__}: {exc}"
    return result


def _login(sock, host: str, config: dict) -> tuple[str, str]:
    from kafka.errors import for_code
    from kafka.net.sasl import get_sasl_mechanism
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                     SaslHandshakeResponse)
    protocol = config.get("security_protocol", "PLAINTEXT")
    if protocol.endswith("SSL"):
        sock = config["ssl_context"].wrap_socket(sock, server_hostname=host)
    with sock:
        asked = _asking(sock)
        asked(ApiVersionsRequest(), ApiVersionsResponse, 0)
        if not protocol.startswith("SASL_"):
            return "ok", ""
        name = config["sasl_mechanism"]
        offered = asked(SaslHandshakeRequest(mechanism=name), SaslHandshakeResponse, 1)
        if offered.error_code:
            return "mechanism", f"it offers {', '.join(offered.mechanisms) or 'none'}"
        mechanism = get_sasl_mechanism(name)(host=host, **config)
        while not mechanism.is_done():
            answer = asked(SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes()), SaslAuthenticateResponse, 1)
            if answer.error_code:
                return "auth", answer.error_message or for_code(answer.error_code).__name__
            mechanism.receive(answer.auth_bytes)
        return ("ok", "") if mechanism.is_authenticated() else ("auth", "the broker's last SASL message did not verify")


def _asking(sock):
    """A function that sends a request on `sock` and returns the broker's answer, read whole."""
    correlation = iter(range(1, 1 << 30))

    def read(size: int) -> bytes:
        data = b""
        while len(data) < size:
            if not (chunk := sock.recv(size - len(data))):
                raise _Closed()
            data += chunk
        return data

    def asked(request, answer_class, version: int):
        request.with_header(correlation_id=next(correlation), client_id="joinlab-login-check")
        sock.sendall(request.encode(version=version, header=True, framed=True))
        return answer_class.decode(read(struct.unpack(">i", read(4))[0]), version=version, header=True)
    return asked


_AUTH = re.compile(r"SaslAuthentication|SaslAuthenticationException|Authentication failed|invalid credentials"
                   r"|UnsupportedSaslMechanism|IllegalSaslState", re.I)
_TLS = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|SslAuthenticationException"
                  r"|PKIX path|SSL handshake failed|Handshake failed|hostname mismatch|No subject alternative"
                  r"|WRONG_VERSION_NUMBER|unable to find valid certification path", re.I)
_TOPIC_ACL = re.compile(r"TopicAuthorization\w*|Not authorized to access topics?: \[?([^\]\n]*)\]?", re.I)
_GROUP_ACL = re.compile(r"GroupAuthorization\w*|Not authorized to access group", re.I)
_CLUSTER_ACL = re.compile(r"ClusterAuthorization\w*", re.I)


def _kind(text: str) -> str | None:
    for kind, pattern in (("auth", _AUTH), ("tls", _TLS), ("topic", _TOPIC_ACL), ("group", _GROUP_ACL),
                          ("cluster", _CLUSTER_ACL)):
        if pattern.search(text):
            return kind
    return None


def redact(text: str, current: KafkaSettings | None = None) -> str:
    """`text` with every secret of the settings (a property's secret value, the SASL password) hidden."""
    try:
        current = current or settings()
    except KafkaSettingsError:
        return text
    hidden = [v for k, v in current.properties.items() if secret(k) and v]
    hidden += [m.group(2) for m in _JAAS_OPTION.finditer(current.properties.get("sasl.jaas.config", ""))
               if m.group(1) == "password"]
    for value in sorted({h for h in hidden if len(h) >= 3}, key=len, reverse=True):
        text = text.replace(value, "[hidden]")
    return text


def _where() -> str:
    try:
        source = settings().source
    except KafkaSettingsError:
        source = ""
    return f" ({source})" if source else " ($LAB_KAFKA_PROPERTIES's file or the KAFKA_ variables)"


def _short(reason: str) -> str:
    """The reason's core, on one line: kafka-python's error classes and wrappers dropped."""
    reason = " ".join(reason.split())
    reason = re.sub(r"\[Error \d+\] |\w+Error: |\[SSL: \w+\] |\(_ssl\.c:\d+\)|^\(|\)$", "", reason)
    reason = re.sub(r"\b(\w+): \1\b", r"\1", reason).strip(" ()")
    return reason[:200]


def describe(kind: str | None, reason: str, bootstrap: str | None, topics: str = "") -> str | None:
    """One line for a failure of `kind` (auth, tls, topic, group, cluster, unreachable)."""
    at = f" at {bootstrap}" if bootstrap else ""
    reason = _short(redact(reason))
    if kind == "auth":
        return (f"Kafka{at} refused the credentials (SASL authentication failed: {reason}): check the user and "
                f"password in sasl.jaas.config, and sasl.mechanism{_where()}.")
    if kind == "tls":
        if re.search(r"hostname|subject alternative|match", reason, re.I):
            what = ("the broker's certificate does not name the host the client connected to: check "
                    "bootstrap.servers (and the broker's advertised listeners)")
        elif re.search(r"verify failed|PKIX|certification path|self.signed|unknown ca|issuer", reason, re.I):
            what = ("the broker's certificate is not signed by a CA the client trusts: check that "
                    "ssl.truststore.certificates (or ssl.truststore.location, PEM) holds the CA that signed it")
        elif re.search(r"WRONG_VERSION|record layer|EOF|closed", reason, re.I):
            what = "the listener does not speak TLS: check security.protocol and the port in bootstrap.servers"
        else:
            what = ("check security.protocol and the port in bootstrap.servers, and that ssl.truststore.certificates "
                    "(or ssl.truststore.location, PEM) holds the CA that signed the broker's certificate")
        return f"the TLS handshake with Kafka{at} failed ({reason}): {what}{_where()}."
    if kind == "topic":
        names = f" {topics}" if topics else ""
        return (f"Kafka{at} denied this user access to topic{names} (TopicAuthorizationFailed): the user needs "
                f"the ACLs DESCRIBE and READ on the topics it reads, DESCRIBE and WRITE on those it writes "
                f"(docs/operations.md#your-own-kafka).")
    if kind == "group":
        return (f"Kafka{at} denied this user a consumer group (GroupAuthorizationFailed: {reason}): the user "
                f"needs READ on the group (docs/operations.md#your-own-kafka).")
    if kind == "cluster":
        return (f"Kafka{at} denied this user an operation on the cluster (ClusterAuthorizationFailed: {reason}) "
                f"(docs/operations.md#your-own-kafka).")
    if kind == "unreachable":
        return (f"no Kafka broker answered{at}" + (f" ({reason})" if reason else "")
                + f": check bootstrap.servers, and security.protocol ({_protocol()}) against the listener's{_where()}.")
    if kind == "mechanism":
        return (f"Kafka{at} does not offer the SASL mechanism {_mechanism()} ({reason}): set sasl.mechanism to one "
                f"it offers, with that mechanism's login module in sasl.jaas.config{_where()}.")
    if kind == "closed":
        return (f"Kafka{at} closed the connection before it answered" + (f" ({reason})" if reason else "")
                + ": check security.protocol "
                f"({_protocol()}) against the listener's (a TLS listener spoken to in plain text closes it so), "
                f"and bootstrap.servers{_where()}.")
    if kind in ("ok", "slow"):
        login = " and the login" if _protocol().startswith("SASL_") else ""
        what = (f"answered a check of the connection{login}, but the client's bootstrap did not complete in time"
                if kind == "ok" else f"accepted the connection but {reason}")
        return (f"Kafka{at} {what}: the broker may be overloaded or still starting, or bootstrap.servers names "
                f"another service{_where()}.")
    return None


def _mechanism() -> str:
    try:
        return settings().properties.get("sasl.mechanism", "GSSAPI").upper()
    except KafkaSettingsError:
        return "?"


def _protocol() -> str:
    try:
        return settings().protocol
    except KafkaSettingsError:
        return "?"


def explain(exc: BaseException, bootstrap: str | None = None) -> str | None:
    """One line for a kafka-python failure (the exception and its causes; for a bootstrap that
    failed, what `login_check` met), or None when it is not one the lab knows."""
    from kafka import errors
    chain, seen = [], exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for one in chain:
        if isinstance(one, (KafkaAccessError, KafkaSettingsError)):
            return str(one)
    text = " ".join(str(one) for one in chain)
    for one in chain:
        if isinstance(one, errors.TopicAuthorizationFailedError):
            names = re.sub(r"^\[Error \d+\] TopicAuthorizationFailedError:?\s*", "", str(one))
            return describe("topic", text, bootstrap, names if re.fullmatch(r"[\w.,\- ]+", names or "-") else "")
        if isinstance(one, errors.GroupAuthorizationFailedError):
            return describe("group", text, bootstrap)
        if isinstance(one, errors.ClusterAuthorizationFailedError):
            return describe("cluster", text, bootstrap)
        if isinstance(one, errors.SaslAuthenticationFailedError):
            return describe("auth", text, bootstrap)
    if any(isinstance(one, errors.KafkaTimeoutError) for one in chain) and re.search(r"bootstrap", text, re.I):
        try:
            bootstrap = bootstrap or settings().bootstrap
            kind, reason = login_check(bootstrap, client_config()) if bootstrap else ("unreachable", "")
        except KafkaSettingsError as bad:
            return str(bad)
        return describe(kind, reason, bootstrap)
    kind = _kind(text)
    return describe(kind, text, bootstrap) if kind else None


# Kafka's Java client's exceptions as Spark's error text carries them (a query's failure).
_JAVA = re.compile(r"org\.apache\.kafka\.common\.errors\.(SaslAuthenticationException|SslAuthenticationException"
                   r"|TopicAuthorizationException|GroupAuthorizationException|ClusterAuthorizationException"
                   r"|TimeoutException)(?::\s*([^\n]*))?")
_JAVA_KIND = {"SaslAuthenticationException": "auth", "SslAuthenticationException": "tls",
              "TopicAuthorizationException": "topic", "GroupAuthorizationException": "group",
              "ClusterAuthorizationException": "cluster", "TimeoutException": "unreachable"}


def spark_failure(text: str) -> str | None:
    """One line for a query that Kafka's Java client failed (Spark's error text), or None."""
    found = _JAVA.findall(text)
    if not found:
        return None
    name, message = min(found, key=lambda f: list(_JAVA_KIND).index(f[0]))  # the telling one first
    try:
        bootstrap = settings().bootstrap
    except KafkaSettingsError:
        bootstrap = None
    kind = _JAVA_KIND[name]
    if kind == "tls":  # Java says why further down: PKIX (an unknown CA), or no name matching the host
        deeper = re.search(r"(PKIX path building failed|unable to find valid certification path[^\n]*"
                           r"|No subject alternative \w+ matching[^\n]*)", text)
        message = deeper.group(1) if deeper else message
    topics = ""
    if kind == "topic" and (named := re.search(r"Not authorized to access topics: \[([^\]]*)\]", text)):
        topics = named.group(1)
    return describe(kind, message or name, bootstrap, topics)
