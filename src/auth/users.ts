import { eq } from "drizzle-orm";
import type { Database } from "../db/client";
import { type User, users } from "../db/schema";
import { newId } from "../platform/ids";
import type { Identity } from "./oidc";

/**
 * The person an identity belongs to, created at their first sign-in. (issuer, subject) is the key:
 * an email can change hands, a subject cannot. Email, its verification and name follow the provider.
 */
export async function upsertUser(db: Database, identity: Identity, now: Date): Promise<User> {
  const profile = {
    email: identity.email,
    emailVerified: identity.emailVerified,
    name: identity.name,
    lastSignInAt: now,
  };
  const [user] = await db
    .insert(users)
    .values({
      id: newId("usr", now.getTime()),
      issuer: identity.issuer,
      subject: identity.subject,
      ...profile,
      createdAt: now,
    })
    .onConflictDoUpdate({ target: [users.issuer, users.subject], set: profile })
    .returning();
  return user!;
}

export async function userById(db: Database, id: string): Promise<User | undefined> {
  const [user] = await db.select().from(users).where(eq(users.id, id)).limit(1);
  return user;
}
