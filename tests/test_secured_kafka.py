"""Any Kafka, secured (issue 51): the lab's commands on a SASL_SSL listener (SCRAM-SHA-512, a
certificate from a CA of the test's own) with Kafka's ACL authorizer, as a user allowed only its
patterns' topics, the settings in a properties file or in KAFKA_ variables, as a user gives them.
One broker for the module (tests/secured_kafka.py); the jobs run on the test session's Spark
Connect server. No secret on a command line, in a log the lab writes, or in a printed line.
The settings' parsing and translation, pure logic, are at the end."""
from __future__ import annotations

import os
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from joinlab import patterns
from joinlab.generate import Record, send
from joinlab.kafka_settings import (KafkaSettings, KafkaSettingsError, from_environment, parse_properties,
                                    pem_certificates, spark_failure, variable_property)
from tests.conftest import ROOT, close_cached_producers
from tests.secured_kafka import MECHANISM, SecuredKafka, certificate_authority, pem, running
from tests.watched import Watched

USER = "alice"
ALLOWED = ["tweet-views", "lottery"]  # the user's patterns: READ, WRITE, DESCRIBE on their topics
READ_ONLY = "ad-clicks"               # its topics exist; the user may DESCRIBE them only
JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with running(tmp_path_factory.mktemp("secured-kafka"), USER, ALLOWED, [READ_ONLY], ["other-topic"]) as kafka:
        yield kafka
        close_cached_producers()  # the session's Spark server's sink producers for this broker, before it stops


def properties_text(kafka: SecuredKafka, secret: str, ca: str) -> str:
    """A client.properties as a user writes one: the JAAS line and the CA split over lines."""
    certificate = " \\\n    ".join(ca.strip().splitlines())
    return (f"# {USER} on the secured listener\n"
            f"bootstrap.servers={kafka.secured}\n"
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={MECHANISM}\n"
            f"sasl.jaas.config={JAAS} \\\n    username=\"{USER}\" \\\n    password=\"{secret}\";\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.certificates={certificate}\n")


def user_env(kafka: SecuredKafka, home: Path, secret: str | None = None, ca: str | None = None,
             file: bool = True) -> dict:
    """The environment of the user's commands: the settings in a properties file, or in KAFKA_ variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "LAB_KAFKA_PROPERTIES"}
    env["LAB_HOME"] = str(home)
    secret, ca = secret or kafka.password, ca or kafka.ca_pem
    if file:
        home.mkdir(parents=True, exist_ok=True)
        path = home / "client.properties"
        path.write_text(properties_text(kafka, secret, ca))
        path.chmod(0o600)
        env["LAB_KAFKA_PROPERTIES"] = str(path)
    else:
        env.update(KAFKA_BOOTSTRAP_SERVERS=kafka.secured, KAFKA_SECURITY_PROTOCOL="SASL_SSL",
                   KAFKA_SASL_MECHANISM=MECHANISM, KAFKA_SSL_TRUSTSTORE_TYPE="PEM", KAFKA_SSL_TRUSTSTORE_CERTIFICATES=ca,
                   KAFKA_SASL_JAAS_CONFIG=f'{JAAS} username="{USER}" password="{secret}";')
    return env


def one_line(done: subprocess.CompletedProcess) -> str:
    """The command's message: exactly one line on stderr, no Python or Java traceback."""
    text = done.stderr.strip()
    assert len(text.splitlines()) == 1, text
    assert "Traceback" not in text and "\tat " not in text and "Exception in thread" not in text, text
    return text


def files_holding(folder: Path, secret: str) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.endswith(".properties"):  # the user's own settings file
            try:
                if secret.encode() in path.read_bytes():
                    found.append(str(path))
            except OSError:
                pass
    return found


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_user_allowed_only_its_patterns_topics_runs_them_through_sasl_ssl_and_verifies_them(
        secured, spark, tmp_path):
    """generate, run --available-now and verify for tweet-views (settings in a properties file) and
    lottery (in KAFKA_ variables), each output equal to the reference; no secret on any command
    line (also while the query runs), in the lab's logs and checkpoints, the broker's log, or any
    printed line."""
    watched = Watched()
    for pattern, file in (("tweet-views", True), ("lottery", False)):
        env = user_env(secured, tmp_path / pattern, file=file)
        made = watched.joinlab(env, "generate", pattern, "--count", "300", "--seed", "7", "--no-progress")
        assert made.returncode == 0, made.stderr[-3000:]
        assert f"at {secured.secured}" in made.stdout
        run = subprocess.Popen([sys.executable, "-m", "joinlab", "run", pattern, "--available-now", "--json"],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        errors: list[str] = []
        reader = threading.Thread(target=lambda: errors.extend(run.stderr.read().splitlines()), daemon=True)
        reader.start()
        batches = 0
        with watched.scanning():
            for line in run.stdout:  # each line: a micro-batch done, the query running
                watched.printed.append(line.rstrip("\n"))
                if line.startswith("{"):
                    batches += 1
                    if batches == 1:
                        assert watched.scan() > 10  # the query's server, its Python workers, this run
            assert run.wait(timeout=300) == 0, "\n".join(errors[-40:])
        reader.join(timeout=30)
        watched.printed += errors
        assert batches >= 1, errors
        verified = watched.joinlab(env, "verify", pattern)
        assert verified.returncode == 0 and "0 mismatches (OK)" in verified.stdout, verified.stdout + verified.stderr
        assert not verified.stdout.startswith(f"{pattern}: 0 expected")
    assert not watched.holding(secured.password), watched.holding(secured.password)
    assert not files_holding(tmp_path, secured.password), "the lab wrote the password into these files"
    assert secured.password not in secured.log_path.read_text(errors="replace")


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_topics_outside_the_users_acls_are_refused_in_one_line_that_names_what_is_missing(secured, spark, tmp_path):
    env = user_env(secured, tmp_path)
    watched = Watched()
    hidden = watched.joinlab(env, "topics", "tail", "other-topic")  # it exists; the user may not DESCRIBE it
    assert hidden.returncode == 2
    assert "no topic 'other-topic'" in one_line(hidden) and "may not see" in hidden.stderr
    created = watched.joinlab(env, "topics", "create", "car-pollution")  # no CREATE
    assert created.returncode == 2
    line = one_line(created)
    assert "refused to create the topics car-arrivals, car-pollution" in line and "CREATE" in line, line
    written = watched.joinlab(env, "generate", READ_ONLY, "--count", "20", "--no-progress")  # DESCRIBE only
    assert written.returncode == 2
    line = one_line(written)
    assert "TopicAuthorizationFailed" in line and "WRITE" in line, line
    # The Spark side: a job reading topics the user may DESCRIBE but not READ (the admin wrote records to them)
    records = [Record(topic, b"k", b'{"not": "read"}', "event") for topic in patterns.job(READ_ONLY).INPUT_TOPICS]
    send(secured.admin, records, progress=False)
    ran = watched.joinlab(env, "run", READ_ONLY, "--available-now", "--quiet")
    assert ran.returncode == 1, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "the job stopped" in line]
    assert said and "KafkaError" in said[0] and "TopicAuthorizationFailed" in said[0], ran.stderr
    assert "Traceback" not in ran.stderr and "\tat " not in ran.stderr, ran.stderr
    assert not watched.holding(secured.password), watched.holding(secured.password)
    print("\n".join([hidden.stderr, created.stderr, written.stderr, said[0]]))


@pytest.mark.parametrize("wrong", ["password", "ca"])
def test_a_wrong_password_or_an_unknown_ca_fails_within_30_seconds_in_one_line(secured, tmp_path, wrong):
    env = user_env(secured, tmp_path, secret="not-" + secured.password if wrong == "password" else None,
                   ca=secured.other_ca_pem if wrong == "ca" else None)
    start = time.monotonic()
    done = Watched().joinlab(env, "generate", "tweet-views", "--count", "10", "--no-progress", timeout=60)
    took = time.monotonic() - start
    line = one_line(done)
    assert done.returncode == 2 and took < 30, (took, line)
    if wrong == "password":
        assert "refused the credentials (SASL authentication failed" in line and "sasl.jaas.config" in line, line
    else:
        assert "TLS handshake" in line and "certificate verify failed" in line and "ssl.truststore" in line, line
    assert "not-" + secured.password not in done.stderr + done.stdout
    print(f"{wrong}: failed in {took:.1f} s: {line}")


def test_after_a_failed_bootstrap_the_lab_s_own_check_names_the_step_that_failed_every_time(secured, tmp_path):
    # kafka-python drops the broker's refusal of a login when the broker's close arrives with it,
    # so its own retries say "socket disconnected" most times; the check reads each answer whole.
    from joinlab.broker import free_port
    from joinlab.kafka_settings import login_check

    def config(**variables) -> dict:
        return from_environment({"KAFKA_BOOTSTRAP_SERVERS": secured.secured, **variables}).client_config()

    def sasl(secret: str, ca: str, mechanism: str = MECHANISM) -> dict:  # the user's settings, as KAFKA_ variables
        return from_environment({**user_env(secured, tmp_path, secret, ca, file=False),
                                 "KAFKA_SASL_MECHANISM": mechanism}).client_config()

    wrong = sasl("not-" + secured.password, secured.ca_pem)
    assert [login_check(secured.secured, wrong) for _ in range(5)] == [
        ("auth", f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                 f"{MECHANISM}")] * 5
    assert login_check(secured.secured, sasl(secured.password, secured.ca_pem)) == ("ok", "")
    kind, reason = login_check(secured.secured, sasl(secured.password, secured.other_ca_pem))
    assert kind == "tls" and "certificate verify failed" in reason, reason
    assert login_check(secured.secured, sasl(secured.password, secured.ca_pem, "SCRAM-SHA-256")) == (
        "mechanism", f"it offers {MECHANISM}")
    assert login_check(secured.secured, config()) == ("closed", "")  # plain text to the TLS listener
    assert login_check(secured.admin, config()) == ("ok", "")        # the PLAINTEXT listener
    kind, reason = login_check(secured.admin, config(KAFKA_SECURITY_PROTOCOL="SSL",
                                                     KAFKA_SSL_TRUSTSTORE_CERTIFICATES=secured.ca_pem))
    assert kind == "tls", (kind, reason)                              # TLS to the PLAINTEXT listener
    assert login_check(f"127.0.0.1:{free_port()},{secured.admin}", config()) == ("ok", "")  # the next one answers
    assert login_check(f"127.0.0.1:{free_port()}", config())[0] == "unreachable"


def test_nothing_answering_at_the_bootstrap_is_one_line_within_30_seconds(tmp_path):
    from joinlab.broker import free_port
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")},
           "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}", "LAB_HOME": str(tmp_path)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "joinlab", "topics", "list"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    assert done.returncode == 2 and took < 30, (took, done.stderr)
    assert "no Kafka broker answered at 127.0.0.1:" in one_line(done)


# --- The settings: parsing and translation (pure) -------------------------------------------------

def test_a_properties_file_is_read_as_java_reads_it():
    text = ("# comment\n! also a comment\n\n  bootstrap.servers = b1:9093,b2:9093\nsecurity.protocol:SASL_SSL\n"
            "sasl.mechanism PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n"
            "    required username=\"u\" \\\n    password=\"p=w:d\";\nkey\\ with\\=odd = a\\tb\\u00e9\\\\\n"
            "ends.with.backslash=c:\\\\\nempty=\n")
    assert parse_properties(text) == {
        "bootstrap.servers": "b1:9093,b2:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="p=w:d";',
        "key with=odd": "a\tbé\\", "ends.with.backslash": "c:\\", "empty": ""}


def test_variables_are_named_as_kafkas_image_names_them_and_win_over_the_file(tmp_path):
    assert variable_property("KAFKA_SASL_JAAS_CONFIG") == "sasl.jaas.config"
    assert variable_property("KAFKA_ABC___DEF__GHI_JK") == "abc-def_ghi.jk"
    path = tmp_path / "client.properties"
    path.write_text("bootstrap.servers=from-file:9092\nclient.id=file\n")
    settings = from_environment({"LAB_KAFKA_PROPERTIES": str(path), "KAFKA_BOOTSTRAP_SERVERS": "from-env:9092",
                                 "KAFKA_HEAP_OPTS": "-Xmx1g", "KAFKA_OPTS": "-Dx", "KAFKA_JMX_OPTS": "-Dy",
                                 "KAFKA_LOG4J_OPTS": "-Dz", "KAFKA_DEBUG": "y", "KAFKA_EMPTY": ""})
    assert dict(settings.properties) == {"bootstrap.servers": "from-env:9092", "client.id": "file"}
    assert settings.bootstrap == "from-env:9092" and "LAB_KAFKA_PROPERTIES" in settings.source
    no_host_check = from_environment({"KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "", "KAFKA_SECURITY_PROTOCOL": "SSL"})
    assert dict(no_host_check.properties)["ssl.endpoint.identification.algorithm"] == ""  # empty: no check
    assert no_host_check.client_config()["ssl_context"].check_hostname is False
    with pytest.raises(KafkaSettingsError, match="LAB_KAFKA_PROPERTIES=.*cannot read it"):
        from_environment({"LAB_KAFKA_PROPERTIES": str(tmp_path / "absent")})


def test_no_secret_is_shown_and_spark_gets_every_property_but_the_bootstrap():
    settings = KafkaSettings({"bootstrap.servers": "b:9093", "security.protocol": "SASL_PLAINTEXT",
                              "sasl.mechanism": "SCRAM-SHA-256", "client.id": "me",
                              "sasl.jaas.config": f'{JAAS} username="u" password="hunter2";',
                              "ssl.key.password": "k3y", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"})
    for shown in (repr(settings), str(settings), f"{settings}"):
        assert "hunter2" not in shown and "k3y" not in shown and "PRIVATE" not in shown and "me" in shown
    options = KafkaSettings({k: v for k, v in settings.properties.items() if k != "ssl.keystore.key"}).spark_options()
    assert "kafka.bootstrap.servers" not in options and options["kafka.sasl.mechanism"] == "SCRAM-SHA-256"
    assert options["kafka.sasl.jaas.config"].endswith('password="hunter2";')


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_credentials_become_kafka_pythons(mechanism):
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    config = KafkaSettings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "client.id": "lab",
                            "sasl.jaas.config": f'{module} required username="al ice" password="p\\"w";'}).client_config()
    assert config == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                      "sasl_plain_username": "al ice", "sasl_plain_password": 'p"w', "client_id": "lab"}


def test_ssl_trusts_the_pem_ca_given_inline_or_in_a_file_and_can_skip_the_host_name(tmp_path):
    _, ca = certificate_authority()
    ca_pem = pem(ca)
    one_line_pem = " ".join(ca_pem.split("\n"))  # as a properties file's continued lines join it
    assert pem_certificates(one_line_pem) == pem_certificates(ca_pem)
    context = KafkaSettings({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                             "ssl.truststore.certificates": one_line_pem}).client_config()["ssl_context"]
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "joinlab test CA"),),)]
    (tmp_path / "ca.pem").write_text(ca_pem)
    context = KafkaSettings({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                             "ssl.truststore.location": str(tmp_path / "ca.pem"),
                             "ssl.endpoint.identification.algorithm": ""}).client_config()["ssl_context"]
    assert not context.check_hostname and len(context.get_ca_certs()) == 1
    assert KafkaSettings({}).client_config() == {}  # PLAINTEXT: kafka-python's defaults


@pytest.mark.parametrize("properties, named", [
    ({"security.protocol": "SSL", "ssl.truststore.location": "/etc/kafka/truststore.jks"}, "ssl.truststore.type=JKS"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": "x.p12"},
     "ssl.truststore.type=PKCS12"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "nonsense"},
     "ssl.truststore.certificates"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism=GSSAPI (Kafka's default"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism=OAUTHBEARER"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, "ssl.keystore.key"),
    ({"security.protocol": "TLS"}, "security.protocol=TLS"),
])
def test_what_kafka_python_cannot_honour_is_refused_in_a_line_naming_the_property(properties, named):
    with pytest.raises(KafkaSettingsError) as refused:
        KafkaSettings(properties).client_config()
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert "PRIVATE KEY" not in str(refused.value) and "nonsense" not in str(refused.value)


def test_kafkas_java_errors_in_sparks_text_become_one_line():
    text = ("StreamingQueryException: [STREAM_FAILED] ... Job aborted due to stage failure: ... "
            "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: "
            "[impressions, clicks]\n\tat org.apache.kafka...")
    assert "topic impressions, clicks (TopicAuthorizationFailed)" in spark_failure(text)
    pkix = ("org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed\nCaused by: "
            "javax.net.ssl.SSLHandshakeException: PKIX path building failed: sun.security...")
    assert "PKIX path building failed" in spark_failure(pkix) and "ssl.truststore" in spark_failure(pkix)
    sasl = ("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
    assert "refused the credentials" in spark_failure(sasl)
    assert spark_failure("java.lang.OutOfMemoryError: Java heap space") is None


def test_the_settings_files_operations_md_shows_translate_as_it_says(tmp_path):
    """The page's properties blocks (docs/operations.md#your-own-kafka), each parsed and translated,
    the CA placeholder and file replaced by a real CA."""
    import re
    page = (ROOT / "docs" / "operations.md").read_text()
    blocks = re.findall(r"```properties\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    _, ca = certificate_authority()
    (tmp_path / "ca.pem").write_text(pem(ca))
    translated = []
    for block in blocks:
        properties = parse_properties(block)
        assert "\n" not in properties.get("sasl.jaas.config", "")
        if "ssl.truststore.certificates" in properties:
            assert properties["ssl.truststore.certificates"].startswith("-----BEGIN CERTIFICATE----- MIIB")
            properties["ssl.truststore.certificates"] = " ".join(pem(ca).splitlines())  # as a file joins it
        if "ssl.truststore.location" in properties:
            properties["ssl.truststore.location"] = str(tmp_path / "ca.pem")
        settings = KafkaSettings(properties)
        translated.append((settings.client_config(), settings.spark_options()))
    (scram, scram_spark), (plain, _), (tls, tls_spark) = translated
    assert (scram["sasl_mechanism"], scram["sasl_plain_username"], scram["sasl_plain_password"]) == \
        ("SCRAM-SHA-512", "alice", "alice-secret")
    assert scram_spark["kafka.security.protocol"] == "SASL_SSL" and "kafka.bootstrap.servers" not in scram_spark
    assert plain["sasl_mechanism"] == "PLAIN" and plain["ssl_context"].get_ca_certs()
    assert tls["security_protocol"] == "SSL" and tls["ssl_context"].check_hostname and tls_spark == {
        "kafka.security.protocol": "SSL"}


def test_a_process_the_lab_starts_with_its_own_environment_gets_the_settings_variables():
    from joinlab.kafka_settings import environment
    assert environment({"LAB_KAFKA_PROPERTIES": "/etc/lab/kafka.properties", "KAFKA_SASL_MECHANISM": "PLAIN",
                        "KAFKA_HEAP_OPTS": "-Xmx1g", "PATH": "/bin"}) == {
        "LAB_KAFKA_PROPERTIES": "/etc/lab/kafka.properties", "KAFKA_SASL_MECHANISM": "PLAIN"}
