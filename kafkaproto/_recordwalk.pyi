from kafkaproto.batch import Buffer

def walk(
    data: Buffer, count: int, reject_null_keys: bool, /
) -> tuple[int, int, int, int, int]: ...
