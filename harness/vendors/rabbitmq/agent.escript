#!/usr/bin/env escript
%%! -hidden -kernel inet_dist_use_interface {127,0,0,1}
%% The management agent of one RabbitMQ peer (harness/vendors/rabbitmq/agent.py): a hidden Erlang node that stays
%% up beside the broker node and answers the harness's management questions over distribution, one line in and one
%% JSON line out. `rabbitmqctl` answers the same questions, but it boots an Elixir VM for each: about 1.6 CPU-s a
%% call on an idle machine here, and a network case polls queue depths on two or three nodes for tens of seconds.
%%
%% Started as `escript agent.escript NODE AGENT_NAME` with the node's environment (HOME holds the Erlang
%% cookie, ERL_EPMD_PORT the node's own epmd). Requests on stdin, one per line:
%%   queues       every queue of vhost "/": name, messages, messages_ready, messages_unacknowledged, consumers
%%   bindings     every binding of vhost "/": source_name, destination_name, destination_kind
%%   federation   every federation link: rabbit_federation_status:status()
%% Answers on stdout, one line each: {"ok": VALUE} or {"error": "TEXT"}. End of stdin ends the agent.

main([Node, Name]) ->
    case net_kernel:start([list_to_atom(Name), shortnames]) of
        {ok, _} -> loop(list_to_atom(Node));
        {error, Why} -> answer({error, io_lib:format("cannot start distribution: ~p", [Why])}), halt(2)
    end.

loop(Node) ->
    case io:get_line(standard_io, "") of
        eof -> halt(0);
        {error, _} -> halt(0);
        Line ->
            answer(request(Node, string:trim(Line))),
            loop(Node)
    end.

request(Node, "queues") ->
    call(Node, rabbit_amqqueue, info_all,
         [<<"/">>, [name, messages, messages_ready, messages_unacknowledged, consumers]]);
request(Node, "bindings") ->
    call(Node, rabbit_binding, info_all, [<<"/">>, [source_name, destination_name, destination_kind]]);
request(Node, "federation") ->
    call(Node, rabbit_federation_status, status, []);
request(_Node, Other) ->
    {error, io_lib:format("unknown request ~p", [Other])}.

call(Node, M, F, A) ->
    case rpc:call(Node, M, F, A, 15000) of
        {badrpc, Why} -> {error, io_lib:format("~s:~s on ~s: ~s", [M, F, Node, text(Why)])};
        Value -> {ok, Value}
    end.

answer({ok, Value}) -> emit(["{\"ok\":", json(Value), "}"]);
answer({error, Text}) -> emit(["{\"error\":", json_string(lists:flatten(Text)), "}"]).

emit(IoData) ->
    io:put_chars(standard_io, [IoData, $\n]).

%% Erlang terms as JSON, the way the harness reads them: a proplist is an object, a printable list or a binary a
%% string, a #resource{} its name, an atom its name, anything else its printed form.
json(true) -> "true";
json(false) -> "false";
json(undefined) -> "null";
json(A) when is_atom(A) -> json_string(atom_to_list(A));
json(I) when is_integer(I) -> integer_to_list(I);
json(F) when is_float(F) -> float_to_list(F, [short]);
json(B) when is_binary(B) ->
    case unicode:characters_to_list(B) of
        L when is_list(L) -> json_string(L);
        _ -> json_string(text(B))
    end;
json({resource, _VHost, _Kind, Name}) -> json(Name);
json([]) -> "[]";
json(L) when is_list(L) ->
    case io_lib:printable_unicode_list(L) of
        true -> json_string(L);
        false ->
            case lists:all(fun({K, _}) when is_atom(K) -> true; (_) -> false end, L) of
                true -> ["{", lists:join(",", [[json_string(atom_to_list(K)), ":", json(V)] || {K, V} <- L]), "}"];
                false -> ["[", lists:join(",", [json(V) || V <- L]), "]"]
            end
    end;
json(Other) -> json_string(text(Other)).

%% A term printed on one line (io_lib:format's ~p breaks lines at 80 columns).
text(Term) -> lists:flatten(io_lib:print(Term, 1, 1000000, -1)).

json_string(Chars) ->
    [$", [escape(C) || C <- Chars], $"].

escape($") -> "\\\"";
escape($\\) -> "\\\\";
escape(C) when C < 16#20 -> io_lib:format("\\u~4.16.0b", [C]);
escape(C) when C > 16#7f -> binary_to_list(unicode:characters_to_binary([C]));
escape(C) -> C.
