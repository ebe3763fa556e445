import type { Principal } from "./principal";

/**
 * The dashboard calls the management API in-process (the Worker's own fetch) on behalf of the person
 * signed in. Their principal travels with the Request object itself: a request from outside is a
 * different object, so no header or secret can claim it.
 */
const acting = new WeakMap<Request, Principal>();

export function actingAs(request: Request, principal: Principal): Request {
  acting.set(request, principal);
  return request;
}

export const principalOfInternalRequest = (request: Request): Principal | undefined => acting.get(request);
