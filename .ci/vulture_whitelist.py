"""What vulture reports unused that is reached from outside the packages.

.ci/run passes this file to ``vulture ledger policies projections pipeline
adapters`` (``--min-confidence 60``). Each entry is a name that no module of
the packages uses but that a framework, a serialiser, a template, the tests or
the docs reach; the comment says which. Vulture matches names, not places, so
an entry covers every definition of that name. Dead code is deleted instead of
listed here.
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Language hooks: the interpreter calls them.
_.__getattr__  # a package's lazy attribute loader (PEP 562, policies/__init__.py)
_.__dir__  # its dir() (PEP 562)

# Framework hooks: the framework calls them (Google ADK's session and memory
# services, the OpenAI Agents SDK's Session, Pydantic AI's ConversationStore and
# history processor); users construct the classes.
_.TurnledgerSessionService  # ADK session service (README, examples, tests/adapters)
_.create_session  # ADK BaseSessionService method
_.get_session  # ADK BaseSessionService method
_.delete_session  # ADK BaseSessionService method
_.get_user_state  # ADK BaseSessionService method
_.append_event  # ADK BaseSessionService method
_.TurnledgerMemoryService  # ADK memory service (tests/adapters)
_.add_session_to_memory  # ADK BaseMemoryService method
_.search_memory  # ADK BaseMemoryService method
_.delete_memory  # ADK BaseMemoryService method
_.custom_metadata  # ADK's keyword argument of add_session_to_memory (unsupported)
_.TurnledgerSession  # OpenAI Agents Session (README, examples, tests/adapters)
_.get_items  # OpenAI Agents Session protocol method
_.add_items  # OpenAI Agents Session protocol method
_.pop_item  # OpenAI Agents Session protocol method
_.clear_session  # OpenAI Agents Session protocol method
_.TurnledgerConversationStore  # Pydantic AI ConversationStore (docs, tests)
_.read_records  # Pydantic AI ConversationStore method
_.write_record  # Pydantic AI ConversationStore method
_.delete_record  # Pydantic AI ConversationStore method
_.read_entry  # Pydantic AI ConversationStore method
_.read_history  # Pydantic AI ConversationStore method
_.TurnledgerHistoryProcessor  # Pydantic AI history processor (docs, tests)
_.capability  # Pydantic AI's hook on the history processor (docs, tests)
_.conversation_from_session  # adapter function in the docs (tests/adapters)

# Library attributes and hooks: set for, or called by, sqlite3 and the pool.
_.row_factory  # sqlite3.Connection attribute, read by sqlite3
_.text_factory  # sqlite3.Connection attribute, read by sqlite3
_._create_connection  # SQLiteConnectionPool's hook for a new connection
_.journal_mode_was_changed_to_wal  # SQLiteConnectionPool's own attribute

# Fields of records: encoded into the ledger or a decision, shown by a template,
# or read by the tests and benchmarks that measure them.
_.breadcrumb  # ledger event field (stored JSON)
_.to_position  # ledger event field (stored JSON)
_.sealed_at_us  # seal record field (stored)
_.groups_committed  # AsyncLedger counter (tests, benchmarks)
_.appends_committed  # AsyncLedger counter (tests, benchmarks)
_.events_read  # projection reader counter (tests)
_.truncated_results  # export decision field (tests)
_.system_prompts  # replay record field (tests, docs)
_.system_digest  # replay record field (tests, docs)
_.pairing_valid  # rerun diff field (tests, docs)
_.last_activity  # shown by pipeline/web/templates/sessions.html
_.fork_at  # shown by pipeline/web/templates/sessions.html
_.projected_usd  # budget decision field (tests/policies)
_.percent_used  # budget decision field (tests/policies)
_.skipped_listing_tool  # image policy decision field (tests/policies)
_.span_had_content  # collect's LogsReport field (the turnledger-batch header, tests)
_.dropped_results  # pairing repair decision field (tests/policies)
_.moved_results  # pairing repair decision field (tests/policies)
_.removed_messages  # pairing repair decision field (tests/policies)
_.pricing_available  # pricing decision field (tests/policies)
_.used_chars  # recall selection field (tests/policies)
_.breadcrumb_inserted  # trim decision field (tests/policies)
_.target_tokens  # trim decision field (tests/policies)
_.categories  # memory backend capability flag (tests)
_.time_filter  # memory backend capability flag (tests)
_.persistent  # memory backend capability flag (tests)
_.distill  # the static table's recipe (scripts/gen_static_table.py)
_.RECIPE  # the static table's recipe name (scripts/gen_static_table.py)
_.embedding_failures  # SQLiteMemory property (tests/projections)
_.last_embedding_error  # SQLiteMemory property (tests/projections)
_.DROPS_SYSTEM  # the formats whose writers drop system messages (tests)

# Public functions reached by the tests (and docs) only.
_.to_stored_event  # ledger codec (tests/ledger, golden files)
_.to_domain_event  # ledger codec (tests/ledger)
_.register_upcaster  # event schema extension point (tests/ledger)
_.known_tags  # event tag registry (tests/test_docs.py)
_.legacy_session_stream_id  # pre-#17 stream ids (tests/pipeline)
_.encode_session_key  # session key codec (tests/pipeline)
_.decode_session_key  # session key codec (tests/pipeline)
_.drop_schema  # PostgreSQL backend: drops its schema (tests)
_.stream_response  # OpenAI Responses format helper (tests/pipeline)
_.path_of  # media store lookup (tests/pipeline)
_.from_messages  # scripted provider from a recorded session (tests/pipeline)
_.run_tool  # tool registry entry point (tests/pipeline, benchmarks)
_.rebound_recorded  # bounding policy (tests/policies)
_.sum_spend  # budget policy (tests/policies)
_.channel_session_scopes  # path policy (tests/policies)
_.cli_session_key  # path policy (tests/policies)
_.is_within  # path policy (tests/policies)
_.merge_scopes  # recall scope policy (tests/policies)
_.make_scrubber  # scrubbing policy (tests/policies)
_.scrub_message  # structured scrubbing policy (tests/policies, tests/pipeline)
_.trim_to_reported_budget  # trimming policy (tests/policies)
_.budget_status  # cost projection (tests/projections)
_.sessions_of  # cost projection (tests/projections)
_.captured_edges  # knowledge projection (tests/projections)
_.SentenceTransformerEmbedder  # embedder for any local model (tests/projections)
_.emit_observer_items  # observer export (tests)
_.export_spans  # observer export to OpenTelemetry (tests)
_.aget_tuple  # LangGraph BaseCheckpointSaver's async API (TurnledgerSaver)
_.alist  # idem
_.aput  # idem
_.aput_writes  # idem
_.adelete_thread  # idem
_.adelete_for_runs  # idem
_.aprune  # idem
_.acopy_thread  # idem
# LangGraph's channel versions, asked of the checkpointer (TurnledgerSaver):
_.get_next_version
_.abatch  # LangGraph BaseStore's async API (TurnledgerStore)
_.supports_ttl  # LangGraph BaseStore's capability flag (TurnledgerStore)
_.from_url  # LangGraph saver and store opened from a ledger URL (docs, tests)
_.write_queue  # the saver's pending group-commit tickets (tests/adapters)
_.expired  # the governance report's expired keys (tests/pipeline)
_.archived  # the governance report's archived keys (idem)
_.lifespan  # uvicorn.Config's lifespan mode, set by turnledger mcp (uvicorn reads it)
_.original_type  # an erased event's type, read by the ledger's callers (tests)
_.views_rebuilt  # erase's report, printed by turnledger erase --json
_.memory_agents  # idem
_.receipts_for  # the erasure receipts naming a stream (library API, tests/pipeline)
# collect's receiver that answers 200 and keeps nothing (bench_collect's baseline):
_.DiscardApp
_.plugin  # the ADK service's instructions plugin, given to the app by its user (tests)
_.before_model_callback  # ADK BasePlugin hook, called by ADK's runner
_.run_hooks  # the Agents SDK session's RunHooks, given to Runner.run by its user
_.on_llm_start  # Agents SDK RunHooks hook, called by the runner
_.on_llm_end  # idem
_.running  # whether a memory's vector backfill thread is alive (tests/projections)
