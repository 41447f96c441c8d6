import type { FixtureInput } from './fixture';

// The demo company `switchboard demo` (and the first `npm start`) provisions: two numbers, templates with
// every variable type and every button type, a default list with every custom-field type, three branches,
// holidays, an AI agent, operators and a few contacts. Ids are in the 990000 range, away from real ones.

export const DEMO_COMPANY_ID = 990001;

/** The day after November's fourth Thursday, as `YYYY-MM-DD`. */
export function blackFridayOf(year: number): string {
  const firstWeekday = new Date(Date.UTC(year, 10, 1)).getUTCDay();
  const firstThursday = 1 + ((4 - firstWeekday + 7) % 7);
  return `${year}-11-${String(firstThursday + 21 + 1).padStart(2, '0')}`;
}

export function buildDemoFixture(options: { key: string; now: Date; keyName?: string }): FixtureInput {
  const year = options.now.getUTCFullYear();
  const nextYear = year + 1;
  const weekdays = ['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY'] as const;
  return {
    companies: [
      {
        id: DEMO_COMPANY_ID,
        name: 'Demo Store',
        email: 'hello@demostore.example',
        phone: '+541155550100',
        website: 'https://demostore.example',
        address: 'Av. Santa Fe 3253, CABA',
        description: 'Home and garden e-commerce with two pickup stores (demo data)',
        timezone: 'America/Argentina/Buenos_Aires',
        companySize: 'MEDIUM',
        companyTypes: ['ECOMMERCE'],
        categories: ['Home', 'Garden', 'Retail'],
        users: [
          { id: 990011, email: 'owner@demostore.example', first_name: 'Lucia', last_name: 'Fernandez' },
          { id: 990012, email: 'marketing@demostore.example', first_name: 'Tomas', last_name: 'Gomez' },
        ],
        apiKeys: [
          { name: options.keyName ?? `Demo key ${options.now.toISOString().slice(0, 10)}`, key: options.key, userId: 990011, active: true, expiresAt: null },
        ],
        contactLists: [
          {
            id: 990101, name: 'Customers', isDefault: true,
            customFields: [
              { id: 990201, key: 'nickname', name: 'Nickname', fieldType: 'string', options: null, required: false, group: null },
              { id: 990202, key: 'notes', name: 'Notes', fieldType: 'text', options: null, required: false, group: null },
              { id: 990203, key: 'delivery_instructions', name: 'Delivery instructions', fieldType: 'textarea', options: null, required: false, group: null },
              { id: 990204, key: 'orders_count', name: 'Orders', fieldType: 'int', options: null, required: false, group: null },
              { id: 990205, key: 'lifetime_value', name: 'Lifetime value', fieldType: 'float', options: null, required: false, group: null },
              { id: 990206, key: 'billing_email', name: 'Billing email', fieldType: 'email', options: null, required: false, group: null },
              { id: 990207, key: 'wishlist_url', name: 'Wishlist', fieldType: 'url', options: null, required: false, group: null },
              { id: 990208, key: 'birthday', name: 'Birthday', fieldType: 'date', options: null, required: false, group: null },
              { id: 990209, key: 'last_purchase_at', name: 'Last purchase', fieldType: 'datetime', options: null, required: false, group: null },
              { id: 990210, key: 'preferred_call_time', name: 'Preferred call time', fieldType: 'time', options: null, required: false, group: null },
              { id: 990211, key: 'tier', name: 'Loyalty tier', fieldType: 'selector', options: ['bronze', 'silver', 'gold'], required: false, group: null },
              { id: 990212, key: 'interests', name: 'Interests', fieldType: 'multiselector', options: ['plants', 'furniture', 'tools', 'lighting'], required: false, group: null },
              { id: 990213, key: 'address_line', name: 'Address', fieldType: 'string', options: null, required: false, group: 'addresses' },
            ],
          },
          {
            id: 990102, name: 'Newsletter', isDefault: false,
            customFields: [
              { id: 990221, key: 'frequency', name: 'Frequency', fieldType: 'selector', options: ['weekly', 'monthly'], required: true, group: null },
            ],
          },
        ],
        contacts: [
          {
            id: 990501, contactListId: 990101, fullName: 'Maria Lopez', phone: '+5491155551001', email: 'maria.lopez@example.com',
            source: 'manual', sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-15T12:00:00Z',
            customFields: [
              { key: 'nickname', value: ['Mari'], expiresAt: null },
              { key: 'orders_count', value: [12], expiresAt: null },
              { key: 'lifetime_value', value: [184500.5], expiresAt: null },
              { key: 'birthday', value: ['1990-04-12'], expiresAt: null },
              { key: 'preferred_call_time', value: ['18:30'], expiresAt: null },
              { key: 'tier', value: ['gold'], expiresAt: null },
              { key: 'interests', value: ['plants', 'lighting'], expiresAt: null },
            ],
          },
          {
            id: 990502, contactListId: 990101, fullName: 'Juan Martinez', phone: '+5491155551002', email: null,
            source: 'msgapp_sync', sourceDetail: 'first message', profilePicture: null, isTest: false, createdAt: '2026-02-03T09:15:00Z',
            customFields: [
              { key: 'tier', value: ['bronze'], expiresAt: null },
              { key: 'last_purchase_at', value: ['2026-02-20T16:45:00Z'], expiresAt: null },
              { key: 'wishlist_url', value: ['https://demostore.example/w/jm'], expiresAt: null },
            ],
          },
          {
            id: 990503, contactListId: 990102, fullName: 'QA Test Contact', phone: '+5491155551099', email: 'qa@demostore.example',
            source: 'api', sourceDetail: null, profilePicture: null, isTest: true, createdAt: '2026-02-10T10:00:00Z',
            customFields: [{ key: 'frequency', value: ['weekly'], expiresAt: null }],
          },
        ],
        branches: [
          {
            id: 1, name: 'Palermo Store', branchType: 'PHYSICAL', address: 'Av. Santa Fe 3253, CABA', phone: '+541155550101',
            schedules: [
              { id: 1, days: [...weekdays], startTime: '10:00:00', finishAt: '19:00:00', isActive: true, description: 'Weekdays', specificDate: null },
              { id: 2, days: ['SATURDAY'], startTime: '10:00:00', finishAt: '14:00:00', isActive: true, description: 'Saturday morning', specificDate: null },
              { id: 3, days: [], startTime: '09:00:00', finishAt: '21:00:00', isActive: true, description: 'Black Friday extended hours', specificDate: blackFridayOf(year) },
            ],
          },
          {
            id: 2, name: 'Belgrano Pickup Point', branchType: 'PHYSICAL', address: 'Av. Cabildo 2040, CABA', phone: '+541155550102',
            schedules: [
              { id: 4, days: ['MONDAY', 'WEDNESDAY', 'FRIDAY'], startTime: '12:00:00', finishAt: '20:00:00', isActive: true, description: 'Pickups', specificDate: null },
              { id: 5, days: ['SUNDAY'], startTime: '10:00:00', finishAt: '13:00:00', isActive: false, description: 'Sunday pickups (paused)', specificDate: null },
            ],
          },
          {
            id: 3, name: 'Online Store', branchType: 'ONLINE', address: '', phone: '',
            schedules: [
              { id: 6, days: ['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY', 'SUNDAY'], startTime: '00:00:00', finishAt: '23:59:59', isActive: true, description: 'Always open online', specificDate: null },
            ],
          },
        ],
        holidays: [
          { id: 1, name: 'Independence Day', description: 'Stores closed; online orders ship the next day', date: `${year}-07-09`, branches: [1, 2], attentionTarget: 'BRANCH', hasCustomHours: false, startTime: null, finishAt: null, isActive: true },
          { id: 2, name: 'Christmas Eve', description: 'Reduced hours', date: `${year}-12-24`, branches: [1], attentionTarget: 'BRANCH', hasCustomHours: true, startTime: '10:00:00', finishAt: '14:00:00', isActive: true },
          { id: 3, name: 'Christmas', description: 'Closed', date: `${year}-12-25`, branches: [], attentionTarget: 'ALL', hasCustomHours: false, startTime: null, finishAt: null, isActive: true },
          { id: 4, name: "New Year's Day", description: 'Closed; the AI assistant answers online', date: `${nextYear}-01-01`, branches: [], attentionTarget: 'ALL_BRANCHES', hasCustomHours: false, startTime: null, finishAt: null, isActive: true },
        ],
        agents: [{ id: 990031, name: 'Luna', version: '1.4.0' }],
        operators: [{ id: 990041, name: 'Carlos' }, { id: 990042, name: 'Valeria' }],
        phoneNumbers: [
          {
            id: 990301, phoneNumberId: '100200300400501', displayPhoneNumber: '+54 9 11 5555-0100', verifiedName: 'Demo Store',
            businessName: 'Demo Store SRL', isPrimary: true, messagingLimitTier: 'TIER_1000', qualityRating: 'GREEN',
            templates: [
              {
                id: 990401, name: 'order_confirmation', language: 'es', category: 'UTILITY', status: 'APPROVED',
                variables: [
                  { name: 'product_image', type: 'IMAGE', position: 1, isRequired: true, component: 'HEADER' },
                  { name: 'customer_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
                  { name: 'order_total', type: 'CURRENCY', position: 2, isRequired: true, component: 'BODY' },
                  { name: 'delivery_date', type: 'DATE_TIME', position: 3, isRequired: true, component: 'BODY' },
                  { name: 'tracking_code', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
                ],
                buttons: [
                  { type: 'URL', text: 'Track my order', url: 'https://demostore.example/track/{{1}}' },
                  { type: 'QUICK_REPLY', text: 'Talk to a person' },
                ],
              },
              {
                id: 990402, name: 'invoice_ready', language: 'en', category: 'UTILITY', status: 'APPROVED',
                variables: [
                  { name: 'invoice_pdf', type: 'DOCUMENT', position: 1, isRequired: true, component: 'HEADER' },
                  { name: 'customer_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
                  { name: 'amount', type: 'CURRENCY', position: 2, isRequired: true, component: 'BODY' },
                ],
                buttons: [{ type: 'PHONE_NUMBER', text: 'Call billing', phoneNumber: '+541155550199' }],
              },
              {
                id: 990403, name: 'spring_collection', language: 'es', category: 'MARKETING', status: 'APPROVED',
                variables: [
                  { name: 'promo_video', type: 'VIDEO', position: 1, isRequired: true, component: 'HEADER' },
                  { name: 'first_name', type: 'TEXT', position: 1, isRequired: false, component: 'BODY' },
                  { name: 'coupon_code', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
                ],
                buttons: [
                  { type: 'COPY_CODE', text: 'Copy coupon' },
                  { type: 'QUICK_REPLY', text: 'No more promotions' },
                ],
              },
              {
                id: 990404, name: 'summer_sale', language: 'es', category: 'MARKETING', status: 'PENDING',
                variables: [{ name: 'discount', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' }],
                buttons: [],
              },
            ],
          },
          {
            id: 990302, phoneNumberId: '100200300400502', displayPhoneNumber: '+54 9 11 5555-0200', verifiedName: 'Demo Store Pickups',
            businessName: 'Demo Store SRL', isPrimary: false, messagingLimitTier: 'TIER_250', qualityRating: 'YELLOW',
            templates: [
              {
                id: 990411, name: 'pickup_ready', language: 'es', category: 'UTILITY', status: 'APPROVED',
                variables: [
                  { name: 'customer_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
                  { name: 'pickup_until', type: 'DATE_TIME', position: 2, isRequired: true, component: 'BODY' },
                ],
                buttons: [{ type: 'URL', text: 'See the map', url: 'https://demostore.example/pickup' }],
              },
              {
                id: 990412, name: 'pickup_reminder', language: 'en', category: 'UTILITY', status: 'REJECTED',
                variables: [],
                buttons: [],
              },
            ],
          },
        ],
      },
    ],
    globalKeys: [],
  };
}
