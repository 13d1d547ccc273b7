"""`make tune`: each server configuration started, loaded and stopped in turn (issue 33).

``server.py`` runs one configuration's server (ManagedServer) and ``keeper.py`` leads its process group;
``effective.py`` reads from the server's log what it actually ran with.
"""
