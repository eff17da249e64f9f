// A chat's processes, for the web UI's workspace panel: the list and each one's output (read by
// whoever may read the chat) and signals (its owner only, audited). Every request goes to the
// chat's workspace agent with the chat's ID as its chat context, so the agent's chat isolation
// (CONTRACT.md 7) keeps another chat's processes out of reach. Each request is bounded, and
// nothing the agent says about a failure is passed on: only our own sentences and its status,
// so neither a token nor anything an agent might echo back reaches an answer.

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { UnsupportedAgentUrlError } from "../chatd/agents.ts";
import type { Chat } from "../chatd/chats.ts";
import { answerTooLargeText, connectionFailureText } from "../chatd/agent-failure-text.ts";
import {
  AgentAddressRefusedError,
  AgentAnswerTooLargeError,
  AgentConnectionError,
  AgentHttpError,
  AgentTimeoutError,
  isLostAnswer,
  parseChatId,
  SignalProcessRequest,
  type AgentClient,
  type ChatId,
} from "../contract/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller } from "./auth.ts";
import { ownedChat, readableChat } from "./chat-access.ts";
import { ApiError, IdParams, parse, Uuid } from "./errors.ts";
import { processOutputView, processView } from "./views.ts";

/** Bound on one agent request of these routes unless ApiOptions.agentTimeoutMs says otherwise. */
export const DEFAULT_AGENT_TIMEOUT_MS = 10_000;

/**
 * A process ID. The contract's are UUIDs (the tool call UUID, or a random one), but an agent
 * without the contract names its processes itself (CHATD.md, US8) and chatd's tools take its
 * names, so any short name of URL-safe characters is taken; it starts with a letter or digit,
 * so it is never `.` or `..` in the agent's path. At most 100 characters: Fastify answers a
 * longer path parameter with 404 before any handler runs (its maxParamLength).
 */
const ProcessId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:~-]{0,99}$/, "must be a process ID");

export const ProcessParams = z.object({ id: Uuid, process_id: ProcessId });

/** The signals of the process_signal tool (and the agent's route): SIGTERM and SIGKILL. */
export const SignalBody = z.object({ signal: SignalProcessRequest.shape.signal });

const SIGNAL_NAMES: Record<z.output<typeof SignalBody>["signal"], string> = {
  terminate: "SIGTERM",
  kill: "SIGKILL",
};

/** The chat's agent and chat context; 409 for a chat without a (still existing) workspace. */
async function agentOf(ctx: ApiContext, chat: Chat): Promise<[AgentClient, ChatId]> {
  const chatId = parseChatId(chat.id)!;
  const none = () =>
    ApiError.coded("no_workspace", "This chat has no workspace, so it has no processes.");
  if (!chat.workspaceId) throw none();
  try {
    const client = await ctx.agents.forWorkspace(chat.workspaceId);
    if (!client) throw none();
    return [client, chatId];
  } catch (err) {
    if (err instanceof UnsupportedAgentUrlError) {
      throw ApiError.coded(
        "agent_unreachable",
        "The workspace agent is unreachable: its URL is not http or https. Change the workspace's agent URL.",
      );
    }
    throw err;
  }
}

/**
 * An agent request's failure as an answer. `effect` names the side effect a request that may
 * have reached the agent may or may not have had, so the answer never claims it did not. The
 * socket's own error is never passed on (agent-failure-text.ts): the log has it.
 */
export function agentFailure(
  err: unknown,
  processId: string | undefined,
  effect?: string,
): unknown {
  const unknownEffect = effect
    ? ` ${effect} may or may not have taken effect: read the process's output before trying again.`
    : " Try again.";
  if (err instanceof AgentAddressRefusedError) {
    return ApiError.coded(
      "agent_unreachable",
      `The workspace agent is unreachable: ${lowerFirst(connectionFailureText(err))}`,
    );
  }
  if (err instanceof AgentConnectionError) {
    return err.phase === "connect"
      ? ApiError.coded(
          "agent_unreachable",
          "The workspace agent is unreachable; check that it is running, then try again.",
        )
      : ApiError.coded(
          "agent_unreachable",
          `The workspace agent is unreachable: the connection was lost before it answered.${unknownEffect}`,
        );
  }
  if (err instanceof AgentTimeoutError) {
    return ApiError.coded(
      "agent_unreachable",
      `The workspace agent is unreachable: it did not answer within ${err.timeoutMs} ms.${unknownEffect}`,
    );
  }
  if (err instanceof AgentAnswerTooLargeError) {
    return ApiError.coded("agent_answer_too_large", answerTooLargeText(err));
  }
  if (err instanceof AgentHttpError) {
    if (processId !== undefined && err.status === 404) {
      return new ApiError(
        404,
        `Process ${processId} not found (exited more than 5 minutes ago and reaped, or another chat's).`,
      );
    }
    if (processId !== undefined && err.status === 409) {
      return ApiError.coded("process_not_running", `Process ${processId} is not running.`);
    }
    if (err.status === 401 || err.status === 403) {
      return ApiError.coded(
        "agent_error",
        `The workspace agent refused the server's request (${err.status}): check the workspace's agent token.`,
      );
    }
    return ApiError.coded(
      "agent_error",
      err.status >= 200 && err.status < 300
        ? "The workspace agent answered with a body that is not JSON."
        : `The workspace agent failed the request (${err.status}).`,
    );
  }
  // Not from talking to the agent (a contract refusal cannot answer these routes): a bug, a 500.
  return err;
}

function lowerFirst(s: string): string {
  return s[0]!.toLowerCase() + s.slice(1);
}

export function processRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const bound = () => ({ timeoutMs: ctx.agentTimeoutMs ?? DEFAULT_AGENT_TIMEOUT_MS });

  // The chat's processes, running first, then newest first (the agent's order and limit).
  app.get("/api/v1/chats/:id/processes", async (request) => {
    const { id } = parse(IdParams, request.params, "path");
    const [client, chatId] = await agentOf(ctx, await readableChat(ctx, request, id));
    try {
      const { processes } = await client.listProcesses({ chatId }, bound());
      return { processes: processes.map(processView) };
    } catch (err) {
      throw agentFailure(err, undefined);
    }
  });

  // The output so far, without waiting: the panel polls while `running`.
  app.get("/api/v1/chats/:id/processes/:process_id/output", async (request) => {
    const { id, process_id } = parse(ProcessParams, request.params, "path");
    const [client, chatId] = await agentOf(ctx, await readableChat(ctx, request, id));
    try {
      return processOutputView(await client.processOutput(process_id, { chatId }, bound()));
    } catch (err) {
      throw agentFailure(err, process_id);
    }
  });

  // Admins and owners read another's chat but do not act in it: signals are the owner's. A
  // signal that may have reached the agent is audited whatever came back; a refused one is not.
  app.post("/api/v1/chats/:id/processes/:process_id/signal", async (request) => {
    const { user } = caller(request);
    const { id, process_id } = parse(ProcessParams, request.params, "path");
    const { signal } = parse(SignalBody, request.body, "body");
    const [client, chatId] = await agentOf(ctx, await ownedChat(ctx, user, id));
    const record = (details: Record<string, unknown> = {}) =>
      audit(ctx.db, request, {
        userId: user.id,
        action: "process.signal",
        target: process_id,
        details: { chat_id: id, signal, ...details },
      });
    try {
      await client.signalProcess(process_id, signal, { chatId }, bound());
    } catch (err) {
      if (isLostAnswer(err) || err instanceof AgentTimeoutError)
        await record({ outcome: "unknown" });
      throw agentFailure(err, process_id, "The signal");
    }
    await record();
    return { message: `Sent ${SIGNAL_NAMES[signal]} to process ${process_id}.` };
  });
}
