import { serveBillingChild } from "./child.js";

/** Billing in a process of its own for the ingestion crash test: `POST /usage/events` on PostgreSQL until it is killed. */
await serveBillingChild({});
