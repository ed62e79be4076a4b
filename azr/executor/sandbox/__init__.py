"""The sandbox supervisor (a forking zygote), its job processes and the wire protocol to reach it.

Backends start a supervisor inside their isolation (namespaces, a container) and talk ``protocol`` to it.
"""
