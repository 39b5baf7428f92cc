"""The deployment's panel on the overview (`connect DEPLOYMENT`): its state and a row per member
(console.tui.presenters.deployment), redrawn as each member's refresh arrives."""

from __future__ import annotations

from collections.abc import Mapping

from textual.widgets import Static

from console.core.deployment import Deployment, DeploymentHealth
from console.core.status import HostView, RouterStatus
from console.tui.presenters.deployment import deployment_panel


class DeploymentPanel(Static):
    DEFAULT_CSS = """
    DeploymentPanel { height: auto; padding: 0 1; margin-bottom: 1; }
    """

    def __init__(self, deployment: Deployment, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.deployment = deployment
        self.health: DeploymentHealth | None = None

    def show(
        self, health: DeploymentHealth | None, views: Mapping[str, HostView], router: RouterStatus | None = None
    ) -> None:
        self.health = health
        self.update(deployment_panel(self.deployment, health, views, router))
