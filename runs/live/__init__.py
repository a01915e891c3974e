"""Live run events: the web process's hub and the WebSocket consumer it feeds."""
