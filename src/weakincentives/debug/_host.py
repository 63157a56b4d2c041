"""Where the viewer listens, and the warning for an address other machines can reach.

Standard library only: `wink` reads `DEFAULT_HOST` (and warns with `host_warning`)
before it loads the viewer, which brings starlette and numpy.

Examples:
    >>> is_loopback(DEFAULT_HOST), is_loopback("0.0.0.0")
    (True, False)
"""

from __future__ import annotations

import ipaddress

__all__ = ["DEFAULT_HOST", "host_warning", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
"""Where the viewer listens unless `--host` says otherwise: this machine only."""


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (`127.0.0.0/8`, `::1`, `localhost`)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_warning(host: str) -> str | None:
    """The warning to print before serving on `host`, or None when it is loopback-only."""
    if is_loopback(host):
        return None
    return (
        f"warning: serving on {host}: anyone who can reach this address can read every "
        "result, transcript and bundle shown, with no authentication. Use the default "
        f"--host {DEFAULT_HOST} unless you mean it."
    )
