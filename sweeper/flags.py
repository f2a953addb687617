"""Hydra's own flags on `python -m sweeper`, read before Hydra runs.

Hydra prints its whole usage over an unknown flag, raises a KeyError when a shell's completion
is asked for outside a shell, silently ignores --package without --cfg (and runs the sweep),
exits 1 with a bare line for a --package that names nothing, and composes --hydra-help without
sweeper's config (so any override of sweeper's keys fails there). Here each is one line, exit 2,
or Hydra's help as asked.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Iterator, List

HELP = "see python -m sweeper --help"
SHELLS = ("bash", "zsh", "fish")
PACKAGES = {"job": "data or data.dali", "hydra": "hydra.job or hydra.sweep", "all": "data or hydra.job"}
COMPLETION = ("install", "uninstall", "query")


def checked(args: List[str]) -> List[str]:
    """The command line to hand Hydra; a misused flag of Hydra's raises SystemExit with its line."""
    if "--version" in args:            # an action that prints and exits by itself
        return args
    given = parse(args)
    if given.experimental_rerun is not None:        # Hydra's rerun of one job's pickle; a sweep has many
        raise SystemExit("error: --experimental-rerun: not for sweeps; resume=latest runs what a run is missing")
    if given.shell_completion:
        check_completion(given.overrides)
    check_cfg_options(given)
    check_config_options(given)
    check_searchpath(given.overrides)
    check_group_choices(given.overrides)
    return hydra_help_args(args, given.overrides) if given.hydra_help else args


def parse(args: List[str]):
    """Hydra's own parser, with its usage errors (the whole usage, then the error) as one line."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def one_line(message: str):
        placed = "; flags (-m, --cfg job, ...) go before the key=value overrides" if "unrecognized" in message else ""
        raise SystemExit(f"error: {message}{placed}; {HELP}")

    parser.error = one_line
    return parser.parse_args(args)


def check_completion(overrides: List[str]) -> None:
    """One of install=, uninstall=, query= and a shell Hydra completes; query only from the shell."""
    asked = [o.partition("=") for o in overrides if o.partition("=")[0] in COMPLETION]
    if len(asked) != 1:
        raise SystemExit("error: --shell-completion: give one of install=bash, uninstall=bash or query=bash "
                         "(or zsh, fish); see --hydra-help")
    what, _, shell = asked[0]
    if shell not in SHELLS:
        wrong = f"no completion for {shell}" if shell else "name the shell"
        raise SystemExit(f"error: --shell-completion {what}={shell}: {wrong}; give {what}=bash, {what}=zsh or "
                         f"{what}=fish")
    if what == "query" and "COMP_LINE" not in os.environ:
        install = f"sweeper -sc install={shell} | source" if shell == "fish" else 'eval "$(sweeper -sc install=bash)"'
        raise SystemExit(f"error: --shell-completion query={shell}: only the shell runs this, as it completes a "
                         f"line (COMP_LINE is not set); to turn completion on, run {install} (the sweeper command "
                         f"that pip installs; Hydra completes no `python -m` command line)")


def check_cfg_options(given) -> None:
    """--package and --resolve shape what --cfg shows; without it Hydra ignores the one (and runs
    the sweep) and raises a ValueError over the other."""
    if given.cfg is not None:
        return
    if given.package is not None:
        raise SystemExit(f"error: --package {given.package}: only picks the part of the config that --cfg shows; "
                         f"add --cfg job (e.g. python -m sweeper --cfg job --package data), or leave it out")
    if given.resolve and not given.help:
        raise SystemExit("error: --resolve: only resolves the ${...} values of the config --cfg or --help shows; "
                         "add --cfg job, or leave it out")


def check_config_options(given) -> None:
    """Where the configs come from: an empty value read as no name at all (Hydra's line then quoted
    a fragment of itself), and a --config-dir that is a file was 'not found'."""
    for flag, value in (("--config-name", given.config_name), ("--config-path", given.config_path),
                        ("--config-dir", given.config_dir)):
        if value is not None and not value.strip():
            raise SystemExit(f"error: {flag}: is empty (an unset variable?); give a value, or leave it out")
    name = given.config_name
    if name is not None and (name.startswith("/") or ".." in name.split("/")):
        raise SystemExit(f"error: --config-name {name}: a config's name, not a path; give the folder with "
                         f"--config-dir FOLDER and the name alone (--config-name NAME)")
    if given.config_dir is not None and not os.path.isdir(os.path.abspath(given.config_dir)):
        raise SystemExit(f"error: --config-dir {given.config_dir}: no such folder; give a folder of your own configs "
                         f"(sweep/NAME.yaml, workload/NAME.yaml), or leave it out")


LITERALS = ("null", "true", "false")


def check_group_choices(overrides: List[str]) -> None:
    """A config group takes a config's name: `+sweep=../../x` loaded any YAML file of the machine,
    and `workload=1` (a number, true, null to Hydra) ended in a ValueError read as a bug."""
    from sweeper.confdir import conf_dir

    shipped = conf_dir()
    groups = {d.name for d in shipped.iterdir() if d.is_dir() and d.name != "hydra"}
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if sep and not key:
            raise SystemExit(f"error: {override}: no key before the '='; write key=value ({HELP})")
        if not sep or key not in groups:
            continue
        name = value.strip().strip("'\"")
        literal = name == value.strip() and (name.lower() in LITERALS or _number(name))   # quoted: a name
        if name.startswith("/") or ".." in name.split("/") or literal:
            names = sorted(p.stem for p in (shipped / key).glob("*.yaml"))
            raise SystemExit(f"error: {key}={value}: a config group takes a config's name ({key}/NAME.yaml in "
                             f"sweeper's configs or a conf/ of your own), not a path, a number, true, false or null; "
                             f"choose one of {', '.join(names)}")


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_searchpath(overrides: List[str]) -> None:
    """hydra.searchpath entries that are not there: Hydra warned over two lines and went on, and a
    sweep kept there then read as 'no such sweep'."""
    given = [o for o in overrides if o.partition("=")[0].lstrip("+") == "hydra.searchpath"]
    if not given:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser

    value = OverridesParser.create().parse_overrides(given[-1:])[0].value()
    for entry in value if isinstance(value, list) else []:
        if not _searchable(str(entry)):
            raise SystemExit(f"error: hydra.searchpath: {entry} is not there; give folders of your own configs "
                             f"(file:///path/conf) or packages (pkg://name), or leave it out")


def _searchable(entry: str) -> bool:
    """Hydra's own test (the one its warning comes from): a source of that scheme that is available."""
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.core.plugins import Plugins

    Plugins.instance()                    # registers the file:// and pkg:// sources
    scheme = entry.split("://", 1)[0] if "://" in entry else "file"
    try:
        source = SourcesRegistry.instance().resolve(scheme)
    except ValueError:                    # no source for that scheme
        return False
    return source(provider="hydra.searchpath", path=entry if "://" in entry else f"file://{entry}").available()


def hydra_help_args(args: List[str], overrides: List[str]) -> List[str]:
    """--hydra-help is Hydra's help about Hydra's own flags: Hydra composes it without sweeper's
    config, so overrides of sweeper's keys (the rest of a command line) would each fail as an
    unknown key. They do not change that help: it is shown without them."""
    ours = {o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))}
    return [a for a in args if a not in ours]


@contextlib.contextmanager
def package_found(args: List[str]) -> Iterator[None]:
    """For --cfg ... --package P, Hydra writes "package 'P' not found in config" and exits 1 when P
    names no section of the config (or a key whose value is null): here that is one line."""
    given = parse(args) if "--version" not in args else None
    if given is None or given.cfg is None or given.package is None:
        yield
        return
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            yield
    except SystemExit as exc:
        if exc.code == 1 and "not found in config" in said.getvalue():
            raise SystemExit(f"error: --package {given.package}: no such part of the {given.cfg} config, or its "
                             f"value is null; give a dotted key such as {PACKAGES[given.cfg]} (python -m "
                             f"sweeper --cfg {given.cfg} shows the whole config)") from None
        sys.stderr.write(said.getvalue())
        raise
    except BaseException:
        sys.stderr.write(said.getvalue())
        raise
    sys.stderr.write(said.getvalue())
