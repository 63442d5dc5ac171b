"""Host classes: which kind of worker host a run needs, from the host classes of its assets (no Dagster here).

An asset says the host class its step needs in the asset tag ``evalmislead/host_class`` (dagster_metadata.py's
``HOST_CLASS_TAG``): ``gpu`` for the steps that send requests to the model (its specs, the test generations,
the determinism probe), since the model's server runs on, or next to, a GPU host; the other assets name none.
A run of several assets needs the most demanding class among them (``HOST_CLASSES`` in that order); in the
Celery deploy profile that class is the run's queue (celery_launcher.py), and the workers of a host class
serve that queue (``celery ... worker -Q gpu``).
"""

from __future__ import annotations

from collections.abc import Iterable

GPU, CPU = "gpu", "cpu"
# most demanding first: a run that needs a GPU host for one of its assets goes to a GPU host as a whole
HOST_CLASSES = (GPU, CPU)


def run_host_class(asset_classes: Iterable[str | None]) -> str | None:
    """The host class a run of assets of ``asset_classes`` needs; None when none of its assets names one.

    A class outside ``HOST_CLASSES`` (a study's own, e.g. ``bigmem``) ranks below them, by name."""
    named = {c.strip() for c in asset_classes if c and c.strip()}
    for host_class in HOST_CLASSES:
        if host_class in named:
            return host_class
    return min(named) if named else None
