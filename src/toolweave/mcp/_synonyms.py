"""Groups of words that people and tool descriptions use for the same thing, for `search_tools`.

BM25 finds only the words a tool's text contains: "folder" misses a tool about directories, "mkdir" one that
creates them. A query word in one of these groups also looks for the group's other words (at a lower weight, see
`_search`). The groups are the common vocabulary of tools (files, version control, time, data, messages), not
the words of any one server; an entry of several words ("create directory") stands for a command or a phrase.
"""

from __future__ import annotations

__all__ = ('GROUPS',)

GROUPS: tuple[tuple[str, ...], ...] = (
    # acting on things
    ('create', 'make', 'new', 'init', 'touch'),
    ('delete', 'remove', 'erase', 'rm', 'unlink', 'drop', 'destroy'),
    ('move', 'rename', 'mv', 'relocate'),
    ('copy', 'duplicate', 'cp', 'clone'),
    ('read', 'open', 'load', 'view', 'cat', 'contents'),
    ('write', 'save', 'store', 'put', 'overwrite'),
    ('edit', 'modify', 'change', 'update', 'replace', 'patch', 'alter'),
    ('list', 'enumerate', 'ls', 'listing'),
    ('find', 'search', 'locate', 'lookup', 'grep', 'match'),
    ('compare', 'diff', 'difference', 'differences'),
    ('undo', 'revert', 'reset', 'unstage', 'discard', 'rollback'),
    ('switch', 'checkout'),
    ('repeat', 'echo'),
    ('compress', 'zip', 'gzip', 'archive', 'deflate'),
    ('enable', 'disable', 'toggle', 'turn on', 'turn off', 'switch on', 'switch off'),
    ('notify', 'notification', 'alert', 'subscribe', 'subscription'),
    ('research', 'investigate', 'study'),
    # things
    ('mkdir', 'create directory'),
    ('rmdir', 'delete directory'),
    ('pwd', 'current directory'),
    ('directory', 'folder', 'dir', 'directories', 'folders'),
    ('file', 'document'),
    ('path', 'location'),
    ('tree', 'recursive', 'nested', 'hierarchy', 'structure'),
    ('size', 'sizes', 'bytes', 'big', 'biggest', 'large', 'largest', 'small', 'smallest', 'tiny'),
    ('metadata', 'info', 'information', 'details', 'properties', 'attributes', 'stat'),
    ('permission', 'permissions', 'access', 'allowed', 'rights'),
    ('image', 'picture', 'photo', 'screenshot', 'png', 'jpg', 'jpeg', 'gif', 'icon', 'logo'),
    ('audio', 'sound', 'music', 'mp3', 'wav'),
    ('media', 'image', 'audio', 'video'),
    ('text', 'txt', 'plain'),
    ('json', 'structured', 'data'),
    ('history', 'log', 'logs', 'past'),
    ('logging', 'log messages', 'debug', 'debugging', 'verbose'),
    ('repository', 'repo', 'git'),
    ('commit', 'commits', 'revision', 'sha', 'head'),
    ('stage', 'staged', 'staging', 'index'),
    ('modified', 'changed', 'changes', 'edited', 'uncommitted', 'dirty'),
    ('time', 'clock', 'hour', 'now', 'current'),
    ('date', 'day', 'today', 'datetime'),
    ('timezone', 'zone', 'tz'),
    ('convert', 'translate', 'transform'),
    ('environment', 'env', 'variables', 'vars'),
    ('sum', 'add', 'plus', 'total', 'addition'),
    ('number', 'numbers', 'integer', 'digits'),
    ('message', 'text'),
    ('link', 'links', 'url', 'uri', 'reference'),
    ('progress', 'long running', 'slow'),
    ('weather', 'forecast', 'temperature'),
    ('sample', 'example', 'test', 'demo'),
)
"""The word groups: each entry is a word, or several words that stand for one."""
