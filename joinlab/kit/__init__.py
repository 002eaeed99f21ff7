"""The pattern kit: the part of the lab a pattern's author reads, in the order of a record's trip.

    kafka        the Kafka source's and sink's options a query starts with (`Kafka.source`, `Kafka.sink`)
    events       parsing: every record a typed event or a dead letter with its reason (`parse_events`)
    stages       a stage's declaration (key, output, time mode) and its processor (`Stage`, `Flow`)
    typed_state  a processor's state values as NamedTuples (`ddl`, `load`, `KeyState`)
    solutions    the seam: the lab's processors, or a candidate's module of the same names
    in_memory    a pattern's stages through pyspark's TwsTester, one micro-batch at a time

Everything else in joinlab (the runner, the CLI, the stacks, the broker, the Spark server, the
room, the interview) runs patterns; none of it is needed to read one (docs/architecture.md).
The kit imports nothing of the lab but joinlab.config.
"""
