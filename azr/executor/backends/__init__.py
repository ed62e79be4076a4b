"""Where sandboxed programs run: ``local`` (namespaced processes on this host) or ``docker`` (containers)."""
