"""The one error path of the ``livebytes`` command.

Exit codes (README, "Exit codes"): 0 success; 1 a domain error, bad value, unwritable path or missing
optional dependency; 2 a usage error (unknown option, missing option, repeated ``--impl`` on predict);
3 a validation that ran and failed. Every error is one line on stderr, never a traceback.

Commands do not catch anything themselves: ``LivebytesGroup.invoke`` turns domain errors into one line
and exit 1, ``LivebytesGroup.main`` turns click's usage errors into one line and exit 2. A command added
in another module (``@app.command()``) gets the same path for free.
"""
from __future__ import annotations

import errno
import sys

import typer
from typer.core import TyperGroup
from typer._click.exceptions import UsageError
from typer.exceptions import Abort
from typing import get_args, get_origin

from livebytes.estimator.errors import LivebytesError, UsageProblem  # noqa: F401 (UsageProblem: the API raises it too)

EXIT_DOMAIN = 1
EXIT_USAGE = 2
EXIT_VALIDATION_FAILED = 3


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def echo_error(message: str) -> None:
    typer.echo(f"error: {_one_line(message)}", err=True)


_warned: list[str] = []        # this command's warnings (the cache's refusal is said once, ``_say_cache_refusal``)


def warn(message: str) -> None:
    _warned.append(_one_line(message))
    typer.echo(f"warning: {_one_line(message)}", err=True)


def _cache_module():
    """The cache module where this process imported it (a command that never reached the cache has nothing to say)."""
    return sys.modules.get("livebytes.estimator.cache")


def _say_cache_refusal() -> None:
    """The cache folder refused during this command (another user's, writable by others, a missing parent): one
    warning line naming it and the fix, unless the command already said it (``process list``)."""
    cache = _cache_module()
    refusal = cache.refusal() if cache is not None else None
    if refusal and not any(_one_line(refusal) in line for line in _warned):
        warn(refusal)


def _domain_message(err: BaseException) -> str | None:
    """The one line for an exception a user can cause, or None for a bug (which keeps its traceback)."""
    if isinstance(err, LivebytesError):
        return str(err)
    if isinstance(err, ModuleNotFoundError):
        return (f"this needs the optional dependency {err.name or err}; install it with "
                f"pip install 'livebytes[validate]' (or the package itself)")
    if isinstance(err, OSError):
        where = f" {err.filename}" if err.filename else ""
        return f"cannot use{where}: {err.strerror or err}"
    return None


def _text_runtime_param(annotation):
    """typer (0.29) builds a pydantic TypeAdapter for every parameter on first use, which imports pydantic
    (~0.2 s of a 0.5 s budget). Every livebytes option is text, a list of text or a flag (the library
    parses the text): for those, a pass-through coercion. Any other annotation (or another typer) keeps typer's own."""
    try:
        from typer._coercion import RuntimeParam  # deferred: a private typer layer older typers lack (the branch below)
    except ImportError:          # pragma: no cover - a typer without this layer
        return None
    is_list = get_origin(annotation) in (list, tuple) and get_args(annotation) == (str,)
    if annotation not in (str, bool) and not is_list:
        return None

    class TextParam(RuntimeParam):
        def _coerce_value(self, value, param, ctx):
            if annotation is bool:          # click's flags give bools already
                return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
            return [str(v) for v in value] if is_list else str(value)
    return TextParam(parameter_info=None, annotation=annotation)


def _fast_params(command) -> None:
    for param in getattr(command, "params", []):
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is not None and getattr(param, "_runtime_param", 0) is None:
            param._runtime_param = _text_runtime_param(descriptor.annotation)


def _plain_metavars(command, ctx) -> None:
    """Help shows ``--json`` (not ``--json <bool>``) and an option's metavar (``--seq-len SIZE``) when it has one."""
    _fast_params(command)
    for param in command.get_params(ctx) if command is not None else []:
        if getattr(param, "is_flag", False) or getattr(param, "param_type_name", "") == "argument":
            param.display_type_rich = lambda ctx: None     # an argument shows its metavar once, as its name
        elif getattr(param, "metavar", None):
            param.display_type_rich = lambda ctx, m=param.metavar: m


def aliases_in_help(command) -> None:
    """Wrap ``command.format_help``: an option is listed by its first name (the HF/FLA name, ``--seq-len``), its other
    names at the end of its help text ("alias: --seq"), so the names column stays narrow enough for 80 columns.
    The names are put back after the help is written: parsing takes every name."""
    if command is None or getattr(command, "_aliases_in_help", False) or not hasattr(command, "format_help"):
        return
    original = command.format_help

    def format_help(ctx, formatter):
        saved = []
        for param in getattr(command, "params", []):
            others = [opt for opt in param.opts if opt.startswith("--")][1:]
            if others and getattr(param, "help", None):
                saved.append((param, param.opts, param.help))
                param.opts = [opt for opt in param.opts if opt not in others]
                param.help = f"{param.help} (alias{'es' if len(others) > 1 else ''}: {', '.join(others)})"
        try:
            return original(ctx, formatter)
        finally:
            for param, opts, text in saved:
                param.opts, param.help = opts, text
    command.format_help = format_help
    command._aliases_in_help = True


def given_twice(command, args: list[str]) -> list[str]:
    """Options of ``command`` that take one value and appear more than once in ``args`` (click keeps the last
    silently): each by its first name. Repeatable options (``--impl``), flags, and anything after ``--`` are not counted."""
    names = {}
    for param in getattr(command, "params", []):
        if getattr(param, "multiple", False) or getattr(param, "is_flag", False) or not getattr(param, "opts", None):
            continue
        for opt in param.opts + getattr(param, "secondary_opts", []):
            names[opt] = param.opts[0]
    seen: dict[str, int] = {}
    for arg in args:
        if arg == "--":
            break
        name = names.get(arg.split("=", 1)[0] if arg.startswith("--") else arg)
        if name is not None:
            seen[name] = seen.get(name, 0) + 1
    return [name for name, n in seen.items() if n > 1]


def _refuse_repeats(command) -> None:
    """Wrap ``command.parse_args``: an option that takes one value, given twice, is a usage error (exit 2)."""
    if command is None or getattr(command, "_refuses_repeats", False) or not hasattr(command, "parse_args"):
        return
    original = command.parse_args

    def parse_args(ctx, args):
        repeated = given_twice(command, list(args))
        if repeated:
            raise UsageError(f"{', '.join(repeated)} given more than once (it takes one value; the last would "
                             "silently win)", ctx)
        return original(ctx, args)
    command.parse_args = parse_args
    command._refuses_repeats = True


class LivebytesGroup(TyperGroup):
    """The app's click group: one error path for every command registered on it."""

    def get_command(self, ctx, cmd_name):
        command = super().get_command(ctx, cmd_name)
        _plain_metavars(command, ctx)
        _refuse_repeats(command)
        aliases_in_help(command)
        return command

    def format_help(self, ctx, formatter):
        _plain_metavars(self, ctx)
        return super().format_help(ctx, formatter)

    def invoke(self, ctx):
        _warned.clear()
        if _cache_module() is not None:
            _cache_module().forget_refusal()
        try:
            return self._invoke_one_error_path(ctx)
        finally:
            _say_cache_refusal()

    def _invoke_one_error_path(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageProblem as err:
            echo_error(err)
            raise typer.Exit(EXIT_USAGE) from None
        except (LivebytesError, OSError, ModuleNotFoundError) as err:
            if isinstance(err, OSError) and err.errno == errno.EPIPE:
                raise typer.Exit(EXIT_DOMAIN) from None
            message = _domain_message(err)
            if message is None:
                raise
            echo_error(message)
            raise typer.Exit(EXIT_DOMAIN) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        _fast_params(self)
        if sys.stdout is None:          # started with standard output closed (``>&-``): the answer would vanish
            echo_error("standard output is closed: the answer has nowhere to go; redirect it to a file or /dev/null")
            if standalone_mode:
                sys.exit(EXIT_DOMAIN)
            return EXIT_DOMAIN
        try:
            code = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        except UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else (prog_name or "livebytes")
            echo_error(f"{err.format_message()} (see: {where} -h)")
            code = EXIT_USAGE
        except Abort:
            code = EXIT_DOMAIN
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code
