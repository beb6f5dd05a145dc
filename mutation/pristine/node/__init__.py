"""Programs the rendered scripts run on the nodes themselves (Python standard library only).

They are real modules so that tests import them; the renderer ships each one's source
inside the script that runs it, so a VM needs nothing of clusterprint installed.
"""
