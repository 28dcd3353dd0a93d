"""The embedded backend: a GGUF model run by llama.cpp in a worker process, one module per
concern.

- ``backbone``: ``EmbeddedBackbone``, the ``Backbone`` the agent loop calls (``local/…`` model
  strings), and the shared worker per model;
- ``worker``: ``LlamaWorker``, the parent side — starts the child, sends requests, turns a
  native crash into an error instead of a dead process;
- ``wire``: the pickled messages the two sides exchange over a socket pair;
- ``child``: the worker process's main loop and ``LlamaRunner`` (prefill, decode, grammars);
- ``batch``: ``BatchDecoder``, greedy replies to several prompts decoded together over one
  shared KV prefix (a ``BatchRequest``: a lockstep group's calls), several tokens per step
  where a reply copies its context (prompt-lookup drafts, ``NgramIndex``);
- ``load``: ``open_llama``, the model loaded with llama.cpp's extra buffer types off;
- ``grammar``: JSON-schema grammars for constrained replies (``tool_choice``,
  ``response_format``);
- ``kv_snapshots``: the kept copies of long KV caches, restored by longest shared prefix;
- ``prefill``: how much of the cache a prompt takes and how the rest is cut into batches, so
  that a reply is a function of its prompt alone.

Above: ``runtime.backbones`` (``make_backbone``, which re-exports ``EmbeddedBackbone`` and
``SMOLLM2_MODEL``), ``runtime.backbones.doctor`` and ``mirage doctor``. Below: ``llama_cpp``,
imported only inside the worker process.
"""
