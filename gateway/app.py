"""The gateway's FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI

from prefixgate import __version__
from prefixgate.config import Settings


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="prefixgate", version=__version__)
    app.state.settings = settings

    @app.get("/health")
    def health() -> dict:
        local = (
            {"model": settings.local_model, "status": "not yet available"} if settings.local_model else None
        )
        return {"status": "ok", "version": __version__, "local_backend": local}

    return app
