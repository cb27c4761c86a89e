"""The web UI: static files only (no logic), served by mailsvc.http.dashboard.ui."""
