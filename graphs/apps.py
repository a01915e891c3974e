"""Django app config for graphs: the graph format (graph, graph version), which every other app builds on."""
from django.apps import AppConfig


class GraphsConfig(AppConfig):
    name = "graphs"
    default_auto_field = "django.db.models.BigAutoField"
