"""mirage agent runtime: messages, backbones, tool-call parsing, the agent loop, sessions.

Importing any mirage package applies the offline defaults first (see ``runtime.offline``).
"""

from runtime import offline as _offline

_offline.apply()
