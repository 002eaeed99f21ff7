"""Wrong answer: join a transaction only if its session is already in state, else send it straight
to the lookup service; a transaction read before its SessionStarted is then looked up before the
service has the session, and is lost to a dead letter. Dedup and the rest are right enough for
the scenario that shows it."""
from pyspark.sql.streaming import StatefulProcessor

from jobs.money_enrichment.rules import BY_LOOKUP, BY_STREAM
from jobs.money_enrichment.given import SESSION_START, TX, TX_FIELDS, USER, USER_UPDATE, flow, pick


class SessionJoin(StatefulProcessor):
    def __init__(self, config):
        self.config = config

    def init(self, handle):
        self.session = handle.getValueState("session", "country string, device string, start_us bigint")
        self.seen = handle.getMapState("seen", "tx_id string", "t_us bigint")

    def handleInputRows(self, key, rows, timerValues):
        watermark = timerValues.getCurrentWatermarkInMs()
        rows = list(rows)
        for row in rows:
            if row.kind == USER_UPDATE:
                yield flow(USER_UPDATE, USER, str(row.user_id), watermark, user_id=row.user_id, t_us=row.t_us,
                           name=row.name, country=row.country, segment=row.segment, version=row.version)
            elif row.kind == SESSION_START and not self.session.exists():
                self.session.update((row.country, row.device, row.t_us))
        for row in rows:
            if row.kind != TX or self.seen.containsKey((row.tx_id,)):
                continue
            self.seen.updateValue((row.tx_id,), (row.t_us,))
            tx = pick(row, TX_FIELDS)
            if self.session.exists():
                country, device, start_us = self.session.get()
                yield flow(TX, USER, str(row.user_id), watermark, session_country=country, session_device=device,
                           session_start_us=start_us, enriched_by=BY_STREAM, **tx)
            else:
                yield flow(TX, USER, str(row.user_id), watermark, enriched_by=BY_LOOKUP, **tx)

    def close(self):
        pass
