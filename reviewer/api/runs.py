"""/api/runs/ and /api/sweeps/: live emulator runs, their frames and commands, and sweeps."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewer import permissions, selectors
from reviewer.models import EmulatorRun, FleetConfigVersion, RunFrame
from reviewer.models.runs import RunStatus
from reviewer.representations import RunSerializer, SweepSerializer
from reviewer.runs import services as run_services
from reviewer.runs import sweeps as sweep_services


class ScenarioSourceSerializer(serializers.Serializer):
    """Where the scenario comes from, and how to change it."""

    config_version = serializers.IntegerField(required=False, allow_null=True,
                                              help_text="A fleet config version id.")
    scenario = serializers.JSONField(required=False, allow_null=True,
                                     help_text="TOML text, a preset name, or a scenario object.")
    session = serializers.IntegerField(required=False, allow_null=True,
                                       help_text="The review session the run belongs to.")
    overrides = serializers.ListField(child=serializers.CharField(), required=False, default=list,
                                      help_text='e.g. ["traffic.qps=2000", "hosts[0].count=3"]')
    # The seed is stored in a 64-bit column and seeds numpy, which takes no negatives.
    seed = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=2**63 - 1)

    def resolve(self, user: Any) -> dict[str, Any]:
        """The service's keyword arguments, with ids looked up among what ``user`` may see."""
        data = self.validated_data
        session = None
        if data.get("session") is not None:
            session = selectors.sessions_visible_to(user).filter(pk=data["session"]).first()
            if session is None:
                raise serializers.ValidationError(
                    {"session": [f"no review session {data['session']} that you take part in"]})
        version = None
        if data.get("config_version") is not None:
            configs = selectors.fleet_configs_visible_to(user)
            version = FleetConfigVersion.objects.filter(pk=data["config_version"], config__in=configs).first()
            if version is None:
                raise serializers.ValidationError(
                    {"config_version": [f"no fleet config version {data['config_version']} you can see"]})
        return {"session": session, "config_version": version, "scenario": data.get("scenario"),
                "overrides": data.get("overrides", []), "seed": data.get("seed")}


@extend_schema_field({"oneOf": [{"type": "integer", "enum": [1, 10, 100]},
                                 {"type": "string", "enum": ["1", "10", "100", "max"]}]})
class SpeedField(serializers.JSONField):
    """A run's speed: 1, 10 or 100 simulated seconds per second (a number or its digits), or "max"."""


class RunStartSerializer(ScenarioSourceSerializer):
    """A request for a run."""

    speed = SpeedField(required=False, default=10, help_text='1, 10, 100 or "max"')


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("session", {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                     description="Only this review session's runs (0 or left out: every run you can see)."),
]))
class RunListCreateView(generics.ListAPIView):
    """Runs you can see (``?session=ID`` narrows to one session); POST starts one (202)."""

    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[EmulatorRun]:
        qs = selectors.runs_visible_to(self.request.user).select_related("started_by").prefetch_related("commands")
        session = _int_param(self.request, "session", 0)
        if session:
            if not 0 < session < 2**63:
                raise serializers.ValidationError({"session": ["give the id of a review session"]})
            qs = qs.filter(session_id=session)
        return qs

    @extend_schema(request=RunStartSerializer, responses={202: RunSerializer})
    def post(self, request: Request) -> Response:
        incoming = RunStartSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        run = run_services.run_start(user=request.user, speed=incoming.validated_data.get("speed", 10),
                                     **incoming.resolve(request.user))
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


def _run_for(request: Request, pk: int) -> EmulatorRun:
    """The run if ``request.user`` may see it, else 404 (outsiders learn nothing)."""
    return get_object_or_404(selectors.runs_visible_to(request.user), pk=pk)


def _steered(request: Request, thing: Any) -> Any:
    """``thing`` (a run or a sweep) if ``request.user`` may send it commands, else 403."""
    if not permissions.can_steer_run(request.user, thing):
        raise PermissionDenied("Only the session's owner and reviewers steer its runs.")
    return thing


class RunDetailView(APIView):
    """A run's status, summary and commands."""

    @extend_schema(responses=RunSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunSerializer(_run_for(request, pk)).data)


def frames_csv_rows(frames: Iterator[dict[str, Any]]) -> Iterator[list[Any]]:
    """Frames as CSV rows: a header, then one row per frame, one column per model and metric.

    The metrics are the ones the run's frames carry, in the engine's order (the
    first frame names them): the worker model decides some of them.
    """
    models: list[str] | None = None
    metric_keys: list[str] = []
    for frame in frames:
        metrics = frame.get("m", {})
        if models is None:
            models = list(frame.get("models", []))
            metric_keys = list(metrics)
            yield (["i", "t_s", "behind", "hosts_alive", "events"]
                   + [f"{model}.{metric}" for metric in metric_keys for model in models])
        row = [frame["i"], frame["t_s"], int(bool(frame.get("behind"))),
               sum(frame.get("h", {}).get("alive", [])), "; ".join(frame.get("events", []))]
        for metric in metric_keys:
            values = metrics.get(metric, [None] * len(models))
            row.extend("" if v is None else v for v in values)
        yield row
    if models is None:
        yield ["i", "t_s", "behind", "hosts_alive", "events"]


class _Echo:
    """A file-like object whose write returns the text, for streaming csv.writer rows."""

    def write(self, text: str) -> str:
        return text


class FramesCSVRenderer(BaseRenderer):
    """Lets ``?format=csv`` select CSV; the view streams the CSV itself, so only
    error answers pass through here."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: dict[str, Any] | None = None) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["detail"])
        writer.writerow([data.get("detail", data) if isinstance(data, dict) else data])
        return out.getvalue().encode()


MAX_FRAMES_PER_PAGE = 10_000


class RunFramesSerializer(serializers.Serializer):
    """A page of a run's frames."""

    run = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    frames = serializers.ListField(child=serializers.DictField(), help_text="Frames in order (Frame.to_dict()).")
    next_after = serializers.IntegerField(allow_null=True, help_text="The ?after= of the next page; null at the end.")


class RunFramesView(APIView):
    """A run's stored frames in order. JSON: ``?after=N`` for those after frame N, at most
    ``?limit=`` (default and maximum 10000) with ``next_after`` to page on. CSV
    (``?format=csv``): every frame after N, streamed."""

    renderer_classes = [JSONRenderer, FramesCSVRenderer]

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="Only frames after this frame number."),
                    OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_FRAMES_PER_PAGE},
                                     description="At most this many frames (JSON; CSV streams them all).")],
        responses={(200, "application/json"): RunFramesSerializer, (200, "text/csv"): OpenApiTypes.STR},
        # ?format=csv answers its errors as CSV too: a "detail" column.
        extensions={"x-error-media-types": ["text/csv"]},
    )
    def get(self, request: Request, pk: int, format: str | None = None) -> Any:
        run = _run_for(request, pk)
        after = _int_param(request, "after", -1)
        # Checked for CSV too, which streams every frame: a malformed parameter is refused whatever the format.
        limit = _int_param(request, "limit", MAX_FRAMES_PER_PAGE)
        if not 1 <= limit <= MAX_FRAMES_PER_PAGE:
            raise serializers.ValidationError({"limit": [f"give 1 to {MAX_FRAMES_PER_PAGE}"]})
        frames = RunFrame.objects.filter(run=run, i__gt=after).order_by("i").values_list("data", flat=True)
        if request.accepted_renderer.format == "csv":
            writer = csv.writer(_Echo())
            rows = (writer.writerow(row) for row in frames_csv_rows(frames.iterator(chunk_size=500)))
            response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-frames.csv"'
            return response
        page = list(frames[: limit + 1])
        more = len(page) > limit
        page = page[:limit]
        return Response({"run": run.pk, "status": run.status, "frames": page,
                         "next_after": page[-1]["i"] if more else None})


def _int_param(request: Request, name: str, default: int) -> int:
    """A whole-number query parameter; 400 naming it when it is not one."""
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise serializers.ValidationError({name: ["give a whole number"]}) from None


class FaultSerializer(serializers.Serializer):
    """A fault in the [[faults]] vocabulary: {"kill": "host:2"} or {"restore": "host:2"}."""

    kill = serializers.CharField(required=False)
    restore = serializers.CharField(required=False)


class FaultQueuedSerializer(serializers.Serializer):
    """A fault command, queued for the run's next frame boundary."""

    id = serializers.IntegerField()
    run = serializers.IntegerField()
    command = serializers.CharField()


class RunFaultsView(APIView):
    """Inject a fault into a running run; it applies at the run's next frame boundary."""

    @extend_schema(request=FaultSerializer, responses={202: FaultQueuedSerializer})
    def post(self, request: Request, pk: int) -> Response:
        run = _steered(request, _run_for(request, pk))
        fault = request.data if isinstance(request.data, dict) else {}
        command = run_services.run_inject(run=run, user=request.user,
                                          fault={k: v for k, v in fault.items()})
        return Response({"id": command.pk, "run": run.pk, "command": command.command},
                        status=status.HTTP_202_ACCEPTED)


class RunCancelView(APIView):
    """Cancel a run: at once if queued, else at its next frame boundary."""

    @extend_schema(request=None, responses={202: RunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        run = _steered(request, _run_for(request, pk))
        run = run_services.run_cancel(run=run, user=request.user)
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class SweepStartSerializer(ScenarioSourceSerializer):
    """A request for a sweep over one key."""

    key = serializers.CharField(help_text='"hosts[0].count", "traffic.qps", or another override key')
    values = serializers.ListField(child=serializers.FloatField(), min_length=1)
    target_p99_s = serializers.FloatField(required=False, allow_null=True, min_value=0.0)
    min_ok_rate = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)


class SweepCreateView(APIView):
    """Start a sweep (202): one run per value at speed max, gathered into a curve."""

    @extend_schema(request=SweepStartSerializer, responses={202: SweepSerializer})
    def post(self, request: Request) -> Response:
        incoming = SweepStartSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        sweep = sweep_services.sweep_start(
            user=request.user, key=data["key"], values=data["values"],
            target_p99_s=data.get("target_p99_s"), min_ok_rate=data.get("min_ok_rate"),
            **incoming.resolve(request.user),
        )
        return Response(SweepSerializer(sweep).data, status=status.HTTP_202_ACCEPTED)


class SweepDetailView(APIView):
    """A sweep's progress (points done of total), curve and answer."""

    @extend_schema(responses=SweepSerializer)
    def get(self, request: Request, pk: int) -> Response:
        sweep = get_object_or_404(selectors.sweeps_visible_to(request.user), pk=pk)
        return Response(SweepSerializer(sweep).data)


class SweepCancelView(APIView):
    """Cancel a sweep: its queued points at once, its running points at their next frame boundary."""

    @extend_schema(request=None, responses={202: SweepSerializer})
    def post(self, request: Request, pk: int) -> Response:
        sweep = _steered(request, get_object_or_404(selectors.sweeps_visible_to(request.user), pk=pk))
        sweep = sweep_services.sweep_cancel(sweep=sweep, user=request.user)
        return Response(SweepSerializer(sweep).data, status=status.HTTP_202_ACCEPTED)


# Included by reviewer.api.urls under /api/.
urlpatterns = [
    path("runs/", RunListCreateView.as_view(), name="run-list"),
    path("runs/<int:pk>/", RunDetailView.as_view(), name="run-detail"),
    path("runs/<int:pk>/frames/", RunFramesView.as_view(), name="run-frames"),
    path("runs/<int:pk>/faults/", RunFaultsView.as_view(), name="run-faults"),
    path("runs/<int:pk>/cancel/", RunCancelView.as_view(), name="run-cancel"),
    path("sweeps/", SweepCreateView.as_view(), name="sweep-create"),
    path("sweeps/<int:pk>/", SweepDetailView.as_view(), name="sweep-detail"),
    path("sweeps/<int:pk>/cancel/", SweepCancelView.as_view(), name="sweep-cancel"),
]
