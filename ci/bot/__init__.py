"""The mailing-list bot: list messages in (``mailbox``), series out (``assemble``), tested through
the pipeline, judged by the policy (``policy``, ``verdict``), answered in the thread (``reply``,
``outgoing``) and as patchwork checks (``patchwork``); ``service`` is the polling loop."""
