"""Which exceptions are a user's mistake, and the one line each gets (read by sweeper.cli).

- Hydra's composition and override errors: the dotted key, what is wrong, what to do.
- An OSError on a path: the path and the system's reason.
- A file that cannot be parsed (truncated, garbled, not sweeper's): the file, found in the
  failing call's arguments, and the parser's first line.
Anything else returns None: it is a bug in sweeper and keeps its traceback.

Apart from these, `no_room_line`: a write the machine refused because its disk is full or over
quota. Neither the user's input nor a bug: its own exit code (exitcodes.NO_ROOM), and the
folder it was writing to, so that an unattended run says what to free. And `node_lost_line`: the
local Ray node a sweep started stopped under it (exitcodes.NODE_LOST).
"""
from __future__ import annotations

import contextlib
import difflib
import errno
import os
import re
from typing import Iterator, Optional

KEYS_HINT = "python -m sweeper --cfg job lists every key and its value"


def user_line(exc: BaseException) -> Optional[str]:
    for check in (hydra_line, defaults_cycle_line, os_line, damaged_file_line):
        line = check(exc)
        if line is not None:
            return line
    return None


# -- Hydra and OmegaConf ----------------------------------------------------------------
def defaults_cycle_line(exc: BaseException) -> Optional[str]:
    """A user's config whose defaults list leads back to itself (a sweep file naming itself, or
    two naming each other): Hydra recurses until Python stops it. The configs of the cycle are
    those Hydra was expanding, read from its frames."""
    if not isinstance(exc, RecursionError):
        return None
    cycle, tb = [], exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.endswith("hydra/_internal/defaults_list.py"):
            path = getattr(frame.f_locals.get("parent"), "get_config_path", lambda: None)()
            if path and path not in cycle and path not in ("<root>", "config"):   # Hydra's root, the primary
                cycle.append(path)
        tb = tb.tb_next
    if not cycle:
        return None
    if len(cycle) == 1:
        return f"error: the defaults list of {cycle[0]} names {cycle[0]} itself; remove that entry"
    return f"error: the defaults lists of {', '.join(cycle)} name each other in a cycle; remove one of those entries"


def hydra_line(exc: BaseException) -> Optional[str]:
    from hydra.errors import HydraException, MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        return missing_config_line(exc.missing_cfg_file, exc.options or [], str(exc))
    if isinstance(exc, OverrideParseException):
        return override_line(exc.override, exc.message)
    if not isinstance(exc, (HydraException, OmegaConfBaseException)):
        return None
    cause = omegaconf_cause(exc)
    if cause is not None and getattr(cause, "full_key", None):
        return key_line(cause)
    return composition_line(str(exc))


NAME_KEYS = ("sweep.name", "run_id")     # keys that take a plain name (a folder under results_dir)


def override_line(override: str, message: str) -> str:
    """An override Hydra's grammar cannot read. Outside quotes it takes ASCII only: a name key says
    which names are allowed, any other key how to quote its value."""
    key, _, value = override.partition("=")
    key = key.lstrip("+~")
    if "=" not in override and not override.startswith("~"):
        return f"error: {override}: no value; write {override}=VALUE (python -m sweeper --cfg job shows each key's)"
    if value.endswith(",") and value[:1] not in "'\"":
        return (f"error: {key}: the value ends with a comma; drop it ({key}={value.rstrip(',')}) or add the grid's "
                "next value")
    if override.isascii():
        return (f"error: {override}: not a valid override ({first_line(message)}); quote a value "
                "with brackets, braces or commas: key='value'")
    if not key.isascii():
        return f"error: {key}: no such key (keys are ASCII); {KEYS_HINT}"
    if key in NAME_KEYS:
        from sweeper.schema._base import name_line

        return f"error: {name_line(key, value.strip(chr(39) + chr(34)))}"
    quoted = "quote each element that holds them: key=['...']" if value[:1] in "[{" else f"quote it: {key}='{value}'"
    return f"error: {key}: {value!r} holds characters outside ASCII, which Hydra reads only inside quotes; {quoted}"


def missing_config_line(missing: str, options, message: str = "") -> str:
    """A config Hydra could not find: named on the command line (`group=name`, with Hydra's options),
    or in the defaults list of a config file (Hydra's "In 'sweep/mine': Could not load ...", no options)."""
    group, _, name = missing.rpartition("/")
    named_in = re.match(r"In '([^']+)': Could not load", message)
    if not group:
        return f"error: {name}: no such config file; check the name"
    choices = ", ".join(o for o in options if not o.startswith("_"))
    where = f"{named_in.group(1)}.yaml: its defaults list names {name}" if named_in else f"{group}={name}"
    advice = f"choose one of {choices}" if choices else f"check the names in {group}/"
    return f"error: {where}: no such {group}; {advice}"


def omegaconf_cause(exc: BaseException):
    from omegaconf.errors import OmegaConfBaseException

    seen = exc
    while seen is not None:
        if isinstance(seen, OmegaConfBaseException):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def key_line(cause) -> str:
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from sweeper.schema.run import removed_line

    key = cause.full_key
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and removed_line(key):
        return f"error: {key}: {removed_line(key)}"
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)):
        hint = KEYS_HINT.replace("--cfg job", "--cfg hydra") if key.startswith("hydra.") else KEYS_HINT
        if cause.object_type_str == "dict":   # a mapping of the user's own keys (cost.gpu_hour_usd, workload.params)
            hint = f"a key of your own in a mapping is added with a leading +: '+{key}=...'; {hint}"
        hint = f"{unpackaged_sweep_file(key)}{hint}"
        return f"error: {key}: no such key in {cause.object_type_str}{did_you_mean(cause)}; {hint}"
    what = first_line(cause.msg or str(cause))
    if "is not Optional" in what or getattr(cause, "value", None) == "":
        return f"error: {key}: cannot be empty or null; give it a value ({KEYS_HINT})"
    return f"error: {key}: {plain_type_error(what)}; give a value of the key's type ({KEYS_HINT})"


def unpackaged_sweep_file(key: str) -> str:
    """What to say of sweep.data..., sweep.hydra...: a sweep file of the user's own without
    `# @package _global_` puts its keys under `sweep:` (conf/sweep/*.yaml all start so)."""
    import dataclasses

    from sweeper.schema import RootConfig

    head, _, rest = key.partition(".")
    top = rest.split(".")[0]
    if head != "sweep" or top not in {f.name for f in dataclasses.fields(RootConfig)} | {"hydra", "defaults"}:
        return ""
    return f"a sweep file without '# @package _global_' as its first line puts its {top}: under sweep.{top}; "


def plain_type_error(what: str) -> str:
    """OmegaConf's "Value 'abc' of type 'str' could not be converted to Integer" as "'abc' is not an integer"."""
    converted = re.match(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", what)
    if converted:
        kind = converted.group(2).lower()
        return f"'{converted.group(1)}' is not {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    boolean = re.match(r"Value '(.*)' is not a valid bool", what)
    return f"'{boolean.group(1)}' is not true or false" if boolean else what


def did_you_mean(cause) -> str:
    parent = getattr(cause, "parent_node", None)
    keys = [str(k) for k in parent.keys()] if hasattr(parent, "keys") else []
    close = difflib.get_close_matches(str(cause.key), keys, n=1)
    if not close:
        return ""
    prefix = cause.full_key.rpartition(".")[0]
    return f" (did you mean {prefix + '.' if prefix else ''}{close[0]}?)"


# Hydra's messages that say what is wrong but not what to do, and the line each gets
KNOWN = ((re.compile(r"^(\S+) appears more than once in the final defaults list"),
          "error: {0}: chosen twice (+{0}=NAME adds a second one); write {0}=NAME, without the +"),
         (re.compile(r"^Multiple values for (\S+)\. To override a value use"),
          "error: {0}: chosen twice (on the command line, or in a config's defaults list); choose it once"),
         (re.compile(r"^BasicSweeper does not support sweep type : (\w+?)(?:_SWEEP)?\b"),
          "error: {0}(): not a grid; a grid takes lists (key=a,b,c), range(start,stop[,step]) and choice(a,b,...)"),
         (re.compile(r"^Sweeping over Hydra's configuration is not supported : '([^=']+)="),
          "error: {0}: Hydra's own settings take one value, not a grid; sweep sweeper's keys (data.batch_size=1,2), "
          "or in a sweep file under hydra.sweeper.params (`data.batch_size: 1,2`, as conf/sweep/*.yaml do)"),
         (re.compile(r"^Could not delete from config\. '([^']+)' does not exist"),
          "error: {0}: ~ deletes a key, and sweeper's keys cannot be deleted; set a value instead (" + KEYS_HINT + ")"))


def composition_line(text: str) -> str:
    """Hydra's own several-line message, as one line led by the key it names."""
    for pattern, line in KNOWN:
        found = pattern.match(text.strip())
        if found:
            return line.format(*(group.lower() if group.isupper() else group for group in found.groups()))
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("Config search path", "provider="))]
    quoted = re.search(r"'([^']+)'", lines[0]) if lines else None
    key = quoted.group(1) if quoted else "config"
    return f"error: {key}: {'; '.join(line.rstrip('.') for line in lines) or 'cannot be composed'}"


# -- a disk that is full ----------------------------------------------------------------
NO_ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def no_room_line(exc: BaseException) -> Optional[str]:
    """The line for a write refused for want of space (also where a library, as pyarrow does,
    gives the errno only in its message), naming the folder written to and its free space."""
    code = _no_room_errno(exc)
    if code is None:
        return None
    folder = _folder_written(exc)
    if not (isinstance(exc, OSError) and exc.filename) and _stdout_full(folder):
        return (f"error: the output (stdout): {os.strerror(code)}; free space where it is redirected, or "
                f"redirect it elsewhere")
    where = f"{folder}: " if folder else ""
    free = f" ({free_space(folder)} free there)" if folder else ""
    return (f"error: {where}{os.strerror(code)}{free}; free space on that disk or set results_dir to another, then "
            "run the command again (a sweep: with resume=latest, only what is missing runs)")


def _stdout_full(folder: Optional[str]) -> bool:
    """Whether stdout is what ran out of room: redirected to /dev/full, or to a file on a full disk
    other than that of `folder` (the one the frames name; a failed print names no file). A log on
    the results' own disk (`> sweep.log`) leaves the line to that folder."""
    import stat
    import sys

    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd)
    except (AttributeError, ValueError, OSError):       # replaced, closed or gone
        return False
    if stat.S_ISCHR(mode.st_mode):
        return mode.st_rdev == os.makedev(1, 7)          # /dev/full
    if not (stat.S_ISREG(mode.st_mode) and os.fstatvfs(fd).f_bavail == 0):
        return False
    try:
        return folder is None or os.stat(folder).st_dev != mode.st_dev
    except OSError:
        return True


def _no_room_errno(exc: BaseException) -> Optional[int]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError):
            if exc.errno in NO_ROOM_ERRNOS:
                return exc.errno
            said = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
            if said and int(said.group(1)) in NO_ROOM_ERRNOS:
                return int(said.group(1))
        exc = exc.__cause__ or exc.__context__
    return None


def _folder_written(exc: BaseException) -> Optional[str]:
    """The folder of the file the failing write named: its filename, or the innermost frame's
    path argument whose folder exists (the file itself may be gone: a failed write removes it)."""
    path = exc.filename if isinstance(exc, OSError) and exc.filename else path_in_traceback(exc, _in_a_folder)
    return os.path.dirname(os.path.abspath(os.fspath(path))) if path is not None else None


def _in_a_folder(value) -> bool:
    try:
        text = os.fspath(value)
        return 0 < len(text) < 4096 and "\n" not in text and os.sep in text and \
            os.path.isdir(os.path.dirname(os.path.abspath(text)))
    except (TypeError, ValueError, OSError):
        return False


def free_space(folder: str) -> str:
    """The free space on `folder`'s disk, as every disk line prints it ("unknown" if unreadable)."""
    import shutil

    try:
        return human_size(shutil.disk_usage(folder).free)
    except OSError:
        return "unknown"


def human_size(n: float) -> str:
    """Bytes as "512 B", "20.0 KiB", "1.5 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# -- the local Ray node, gone ----------------------------------------------------------
def node_lost_line(what: str, logs: Optional[str], kept: int, cut_short: int, not_started: int) -> str:
    """The line for a sweep whose local Ray node stopped: how (`what`: its raylet was killed ...),
    where Ray's logs are, and what became of the trials."""
    where = f"; Ray's logs: {logs}" if logs else ""
    fates = [f"{_trials(kept, 'finished trial')} {'is' if kept == 1 else 'are'} kept"]
    if cut_short:
        fates.append(f"{_trials(cut_short, 'trial')} it ran {'was' if cut_short == 1 else 'were'} cut short")
    if not_started:
        fates.append(f"{not_started} did not start")
    rest = "; run the command again with resume=latest to run them" if cut_short or not_started else ""
    return f"error: the local Ray node stopped mid-sweep ({what}{where}); {', '.join(fates)}{rest}"


def _trials(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# -- files ------------------------------------------------------------------------------
def socket_path_line(variable: str) -> str:
    """What to do about a local Ray's temp folder (RAY_TMPDIR, else TMPDIR) too deep for its sockets."""
    advice = "a shorter RAY_TMPDIR, e.g. /tmp/ray" if variable == "RAY_TMPDIR" else "RAY_TMPDIR=/tmp/ray or a shorter TMPDIR"
    return f"{variable}: too long a path for Ray's socket files (at most 107 bytes with Ray's own part); set {advice}"


def os_line(exc: BaseException) -> Optional[str]:
    if isinstance(exc, OSError) and "AF_UNIX path length" in str(exc):     # Ray's sockets under TMPDIR
        return f"error: {socket_path_line('TMPDIR')}"
    if not isinstance(exc, OSError) or not getattr(exc, "filename", None):
        return None
    reason = exc.strerror or first_line(str(exc))
    return f"error: {exc.filename}: {reason}; check the path and that it can be read and written"


def damaged_types() -> tuple:
    import json
    import tarfile
    import zlib

    types = [json.JSONDecodeError, UnicodeDecodeError, EOFError, tarfile.TarError, zlib.error]
    with contextlib.suppress(ImportError):
        import pyarrow
        types.append(pyarrow.ArrowException)
    with contextlib.suppress(ImportError):
        import yaml
        types.append(yaml.YAMLError)
    return tuple(types)


def damaged_file_line(exc: BaseException) -> Optional[str]:
    if not isinstance(exc, damaged_types()):
        return None
    path = file_in_traceback(exc)
    if path is None:
        return None
    if path.endswith((".yaml", ".yml")):        # most often a config the user wrote (conf/sweep/NAME.yaml)
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return (f"error: {path}: not valid YAML{where} ({type(exc).__name__}: {first_line(str(exc))}); fix the "
                "file, or restore it from a copy")
    return (f"error: {path}: damaged or not a file sweeper wrote ({type(exc).__name__}: "
            f"{first_line(str(exc))}); restore it from a copy or move it out of the way")


def file_in_traceback(exc: BaseException) -> Optional[str]:
    """The file the failing call was reading: the innermost frame's argument that names an
    existing file."""
    return path_in_traceback(exc, _is_file)


def path_in_traceback(exc: BaseException, accept) -> Optional[str]:
    """The innermost frame's path-like argument that `accept` takes."""
    for frame_locals in reversed(list(_frame_locals(exc))):
        for value in frame_locals.values():
            if isinstance(value, (str, os.PathLike)) and accept(value):
                return os.fspath(value)
    return None


def _frame_locals(exc: BaseException) -> Iterator[dict]:
    tb = exc.__traceback__
    while tb is not None:
        yield tb.tb_frame.f_locals
        tb = tb.tb_next


def _is_file(value) -> bool:
    try:
        text = os.fspath(value)
        return 0 < len(text) < 4096 and "\n" not in text and os.path.isfile(text)
    except (TypeError, ValueError, OSError):
        return False


def first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""
