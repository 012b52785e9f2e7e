"""The key=value records convoy writes for checking a run afterwards (the apply log, the push log, PROGRESS
lines), read as common/support/log_records.txt declares them. The C++ writers are built from the same file
(common/support/log_record.h), so a record the writers change is changed here too."""
import pathlib

DECLARATION = pathlib.Path(__file__).resolve().parents[2] / "common" / "support" / "log_records.txt"


def _formats():
    formats = {}
    for number, line in enumerate(DECLARATION.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3:
            raise ValueError(f"{DECLARATION}:{number}: '{line}' is not 'log kind key...'")
        log, kind, *keys = words
        formats.setdefault(log, {})[kind] = [(key.rstrip("?"), key.endswith("?")) for key in keys]
    return formats


FORMATS = _formats()


def keys(log, kind):
    """The declared keys of `log`'s records of `kind`, in order: [(name, optional)]."""
    return FORMATS[log][kind]


def parse(log, line):
    """A record line of `log`: (kind, {key: value}). Raises ValueError naming what is wrong: a kind the log
    does not declare, a field that is not key=value, or a declared key (not optional) that is missing. Keys
    the declaration does not know are kept (a newer writer's)."""
    kind, *rest = line.split()
    declared = FORMATS[log].get(kind)
    if declared is None:
        raise ValueError(f"unknown record '{kind}'")
    fields = {}
    for item in rest:
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"{kind} field '{item}' is not key=value")
        fields[key] = value
    missing = [name for name, optional in declared if not optional and name not in fields]
    if missing:
        raise ValueError(f"{kind} record lacks {', '.join(missing)}")
    return kind, fields


def format_record(log, kind, fields):
    """The line of a record (a test's hand-written logs and chaos_mutate.py's rewrites), its fields in the
    declared order; keys not declared come last, in the order given."""
    declared = [name for name, _ in keys(log, kind)]
    ordered = [k for k in declared if k in fields] + [k for k in fields if k not in declared]
    return " ".join([kind] + [f"{k}={fields[k]}" for k in ordered])
