"""The mistake of the state_on_self_* wrong answers, for any processor: its state variables kept in
dicts on the processor object (as `self.users = {}` in `init` does), not in Spark's state. Right in
one process; but Spark makes a new processor object for every micro-batch and on a restart, and
each starts empty. Timers stay Spark's: only where the values live is wrong."""
from pyspark.sql.streaming.tws_tester import _InMemoryStatefulProcessorHandle


def on_self(processor: type) -> type:
    class OnSelf(processor):
        def init(self, handle):
            self.kept = _InMemoryStatefulProcessorHandle()  # value, list and map states: dicts on this object
            for timers in ("registerTimer", "deleteTimer", "listTimers"):
                setattr(self.kept, timers, getattr(handle, timers))
            super().init(self.kept)

        def handleInputRows(self, key, rows, timerValues):
            self.kept.setGroupingKey(key[0])
            return super().handleInputRows(key, rows, timerValues)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            self.kept.setGroupingKey(key[0])
            return super().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    OnSelf.__name__ = OnSelf.__qualname__ = processor.__name__
    return OnSelf
