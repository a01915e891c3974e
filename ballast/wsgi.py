"""WSGI entry point (management and plain HTTP servers)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballast.settings")
application = get_wsgi_application()
