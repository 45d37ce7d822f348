"""API throttles whose rates are settings read when a request comes in.

DRF's rate throttles bind ``DEFAULT_THROTTLE_RATES`` when they are imported;
these read ``API_THROTTLE_*`` on each request, so the environment (and a test's
settings) decide. A rate is DRF's ``"number/period"`` (``"30/s"``,
``"600/min"``); ``None`` turns that throttle off.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class _RateFromSetting:
    """Mixin: the rate is the named setting, read per request."""

    rate_setting = ""

    def get_rate(self) -> str | None:
        return getattr(settings, self.rate_setting, None)

    def allow_request(self, request: Any, view: Any) -> bool:
        self.rate = self.get_rate()  # type: ignore[misc]
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)  # type: ignore[attr-defined]
        return bool(super().allow_request(request, view))  # type: ignore[misc]


class BurstThrottle(_RateFromSetting, UserRateThrottle):
    """A signed-in user's calls in a short window (``API_THROTTLE_BURST``)."""

    scope = "burst"
    rate_setting = "API_THROTTLE_BURST"


class SustainedThrottle(_RateFromSetting, UserRateThrottle):
    """A signed-in user's calls over minutes (``API_THROTTLE_SUSTAINED``)."""

    scope = "sustained"
    rate_setting = "API_THROTTLE_SUSTAINED"


class AnonThrottle(_RateFromSetting, AnonRateThrottle):
    """Calls without credentials, per address (``API_THROTTLE_ANON``)."""

    scope = "anon"
    rate_setting = "API_THROTTLE_ANON"
