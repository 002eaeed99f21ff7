"""A secured Apache Kafka for tests: the lab's embedded broker with, beside its PLAINTEXT listener
(the admin's: User:ANONYMOUS is a super user there), a SASL_SSL listener (SCRAM-SHA-512) whose
certificate a CA of the test's own signed, and Kafka's ACL authorizer, denying what no ACL allows.
Users are made through the Admin API (AlterUserScramCredentials), never on a command line."""
from __future__ import annotations

import datetime
import ipaddress
import secrets
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from joinlab.broker import HOST, EmbeddedBroker, free_port

MECHANISM = "SCRAM-SHA-512"
LISTENER = "SECURED"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def certificate_authority(common: str = "joinlab test CA"):
    """(key, certificate) of a new CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common)).issuer_name(_name(common))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def server_certificate(ca_key, ca_cert):
    """(key, certificate) for 127.0.0.1 and localhost, signed by the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name("localhost")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


def pem(cert) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass
class SecuredKafka:
    broker: EmbeddedBroker
    secured: str          # the SASL_SSL listener's bootstrap
    ca_pem: str           # the CA that signed the broker's certificate
    other_ca_pem: str     # a CA that did not
    log_path: Path

    @property
    def admin(self) -> str:  # the PLAINTEXT listener: User:ANONYMOUS, a super user
        return self.broker.bootstrap_servers

    def add_user(self, user: str, password: str) -> None:
        from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
        from kafka import KafkaAdminClient
        with closing(KafkaAdminClient(bootstrap_servers=self.admin)) as admin:
            done = admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_512, password, iterations=4096)])
        assert done == {user: None}, done

    def allow(self, user: str, topics: list[str], operations: list[str]) -> None:
        """ACLs: `user` may do each of `operations` (READ, WRITE, DESCRIBE, CREATE...) on each of `topics`."""
        from kafka import KafkaAdminClient
        from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern,
                                 ResourceType)
        acls = [ACL(f"User:{user}", "*", ACLOperation[op], ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))
                for topic in topics for op in operations]
        with closing(KafkaAdminClient(bootstrap_servers=self.admin)) as admin:
            done = admin.create_acls(acls)
        assert not done["failed"], done


def secured_broker(folder: Path) -> tuple[EmbeddedBroker, str, str, str]:
    """An EmbeddedBroker (not started) with a SASL_SSL listener and the ACL authorizer; its
    certificate and key in `folder`. Returns the broker, the secured listener's bootstrap, the CA's
    PEM and another CA's PEM."""
    ca_key, ca = certificate_authority()
    key, cert = server_certificate(ca_key, ca)
    _, other = certificate_authority("another CA")
    keystore = folder / "broker.pem"  # a PEM keystore: the key (PKCS#8) and the certificate chain
    keystore.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()) + pem(cert).encode() + pem(ca).encode())
    keystore.chmod(0o600)
    port = free_port()
    prefix = f"listener.name.{LISTENER.lower()}"
    settings = {
        "listeners": f"{LISTENER}://{HOST}:{port}",
        "advertised.listeners": f"{LISTENER}://{HOST}:{port}",
        "listener.security.protocol.map": f"{LISTENER}:SASL_SSL",
        "sasl.enabled.mechanisms": MECHANISM,
        f"{prefix}.{MECHANISM.lower()}.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        f"{prefix}.ssl.keystore.type": "PEM",
        f"{prefix}.ssl.keystore.location": str(keystore),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }
    return EmbeddedBroker(log_path=folder / "broker.log", settings=settings), f"{HOST}:{port}", pem(ca), pem(other)


def password() -> str:
    return "pw-" + secrets.token_hex(12)


@contextmanager
def running(folder: Path, user: str, allowed: list[str], described: list[str] = (),
            others: list[str] = ()) -> Iterator[SecuredKafka]:
    """The secured broker, running, with `user` (a new password) allowed READ, WRITE and DESCRIBE on
    the topics of the patterns `allowed`, DESCRIBE only on those of `described`, nothing on `others`;
    every topic made beforehand by the admin."""
    from joinlab import patterns
    from joinlab.topics import create_topics
    broker, bootstrap, ca, other = secured_broker(folder)
    with broker:
        kafka = SecuredKafka(broker, bootstrap, ca, other, folder / "broker.log")
        kafka.password = password()
        kafka.add_user(user, kafka.password)
        topics = [t for p in allowed for t in patterns.all_topics(p)]
        seen = [t for p in described for t in patterns.all_topics(p)]
        create_topics(kafka.admin, topics + seen + list(others))
        kafka.allow(user, topics, ["READ", "WRITE", "DESCRIBE"])
        if seen:
            kafka.allow(user, seen, ["DESCRIBE"])
        yield kafka
