"""Wrong answer: spend a coupon on a copy of the count (the original's `coupons--` returned the
old value and stored nothing), so one coupon buys any number of clicks. Decides in arrival order
(enough for the scenario that shows the bug); set STORE_THE_DECREMENT = True and it passes."""
from pyspark.sql.streaming import StatefulProcessor

from jobs.lottery.rules import BOUGHT, INACTIVE, NO_COUPON, NON_POSITIVE, STARTED
from jobs.lottery.given import ENTRY, EVENT, LOTTERY, PASS, USER, flow, grouping_key, reject

STORE_THE_DECREMENT = False
FIELDS = ("event_id", "type", "t_us", "lottery_id", "user_id", "amount")


class LotteryGate(StatefulProcessor):
    def init(self, handle):
        self.started = handle.getValueState("started", "t_us bigint")

    def handleInputRows(self, key, rows, timerValues):
        watermark = timerValues.getCurrentWatermarkInMs()
        for row in rows:
            event = {name: getattr(row, name) for name in FIELDS}
            if row.type == STARTED:
                self.started.update((row.t_us,))
            elif grouping_key(key)[0] == USER or self.started.exists():
                yield flow(EVENT, USER, row.user_id, watermark, **event)
            else:
                yield reject(event, INACTIVE, watermark)

    def close(self):
        pass


class Coupons(StatefulProcessor):
    def init(self, handle):
        self.coupons = handle.getValueState("coupons", "coupons bigint")

    def handleInputRows(self, key, rows, timerValues):
        watermark = timerValues.getCurrentWatermarkInMs()
        for row in rows:
            if grouping_key(key)[0] == PASS:
                yield row
                continue
            event = {name: getattr(row, name) for name in FIELDS}
            coupons = self.coupons.get()[0] if self.coupons.exists() else 0
            if row.type == BOUGHT:
                if row.amount <= 0:
                    yield reject(event, NON_POSITIVE, watermark)
                else:
                    self.coupons.update((coupons + row.amount,))
            elif coupons == 0:
                yield reject(event, NO_COUPON, watermark)
            else:
                left = coupons
                coupons -= 1  # the copy is decremented...
                if STORE_THE_DECREMENT:
                    left = coupons
                self.coupons.update((left,))  # ...and the old value is what is stored
                yield flow(ENTRY, LOTTERY, row.lottery_id, watermark, **event)

    def close(self):
        pass
